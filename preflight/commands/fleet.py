"""preflight fleet: many nodes' reports and facts snapshots, in one view.

Snapshots are evaluated here with the rules and options of ``check`` (profile, --rules, --set, --select and
--ignore, the site configuration); reports are taken as they were judged where they ran, keeping only the
rules --select and --ignore choose. The files of a folder are read and judged by worker processes (--jobs; each
file once, in order, the fleet's aggregate kept here; fleet/workers.py), URLs and standard input here.

Exit codes: 0 every node read is OK (warnings allowed, unless --strict); 1 a node fails; 2 nothing could be
read (or bad options).
"""

from __future__ import annotations

import os
import signal
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Union

import click

from preflight.commands import common, pipeline, site
from preflight.commands.click_options import (CHECK_WITHOUT_FACTS, OUTPUT, check_options, complete_files, format_names,
                                              setting, shown, warn)
from preflight.commands.options import CheckOptions, OutputOptions
from preflight.errors import ExitCode, FactsFileError, PreflightError
from preflight.fleet import read
from preflight.fleet.aggregate import BASELINE_SECTIONS, Fleet, fingerprint, kept
from preflight.fleet.workers import Workers


class Evaluator:
    """Turns each document into a node of the fleet: a report as it is, a snapshot through the pipeline.

    A site configuration applies per node, as on the node itself: its [[match]] sections are matched against
    the snapshot's host name and GPU names (Slurm partitions and features are unknown here, so such a match does
    not apply). The file is read once and the rules for each distinct configuration are prepared once.
    """

    def __init__(self, options: CheckOptions, warn: common.Warn = None) -> None:
        self.given, self.warn = options, warn
        self.config = None
        path = site.locate(options.config, os.environ)
        if path is not None:
            self.config = site.read(path, options, warn)
        self._prepared: dict = {}
        self.defaults = self._for(None)  # the command line's (and [defaults']): reports are filtered by these
        self.chosen = {rule.id for rule in self.defaults.rules}

    def _for(self, here) -> pipeline.Prepared:
        """What a node the configuration sees as ``here`` is judged by (None: no host or GPU known)."""
        from preflight.config import site_config

        applied = site.Applied(self.given, self.config, None, None)
        if self.config is not None:
            applied = site.apply(self.given, None, self.warn, here or site_config.Target(""), self.config)
        effective = applied.effective
        key = None if effective is None else (
            tuple(sorted((k, repr(v)) for k, v in effective.values.items())),
            tuple(item for item, _ in effective.set_items), tuple(path for path, _ in effective.rules))
        if key not in self._prepared:
            self._prepared[key] = pipeline.prepare(self.given, self.warn, applied=applied)
        return self._prepared[key]

    def node(self, document: read.Document, comparing: bool) -> Union["NodeInput", read.Unreadable]:
        """What the fleet keeps of one document: its node judged (``comparing``: with the facts --baseline
        compares), or why it cannot be judged."""
        from preflight import inventory
        from preflight.facts import snapshot

        data = document.data
        if document.kind == "report":
            results = [r for r in data["results"] if isinstance(r, dict)]
            options = self.defaults.options
            if options.select or options.ignore:  # the same rules as the snapshots are judged by
                results = [r for r in results if r.get("id") in self.chosen]
            # Judged again by the one policy (report.blocks): a report judged strictly where it ran stays so.
            strict = options.strict or data.get("strict") is True
            # The scheduler's name for the node when the report was kept for it (--report-dir under Slurm).
            host = next((data[key] for key in ("node", "host") if isinstance(data.get(key), str) and data[key]), None)
            return NodeInput(host, document.path, kept(results), strict, data.get("inventory") if isinstance(
                data.get("inventory"), dict) else None, None)
        try:
            snapshot.validate(data, document.path)
        except FactsFileError as exc:
            return read.Unreadable(document.path, str(exc))
        host = data.get("hostname") if isinstance(data.get("hostname"), str) else None
        prepared = self.defaults
        if self.config is not None:
            from preflight.config import site_config

            try:
                prepared = self._for(site_config.Target((host or "").split(".")[0], site.gpu_names(data)))
            except PreflightError as exc:  # this node's configuration leaves nothing to judge it by
                return read.Unreadable(document.path, "cannot judge %s: %s" % (host or "this node", exc.message))
        report = pipeline.judge(prepared, data, "file %s" % document.path)
        compared = {key: data.get(key) for key in BASELINE_SECTIONS} if comparing else None
        return NodeInput(host, document.path, kept([r.to_json() for r in report.results]), report.strict,
                         inventory.of(data), compared)


class NodeInput(NamedTuple):
    """One node as Fleet.add takes it: made where the file is read (a worker process, or here)."""

    host: Optional[str]
    path: str
    results: List[Dict[str, Any]]
    strict: bool
    inventory: Optional[Dict[str, Any]]
    facts: Optional[Dict[str, Any]]  # the snapshot's sections --baseline compares; None for a report


PARALLEL_FROM = 200  # files in one folder or list below which worker processes cost more than they save
CHUNK = 32  # files a worker takes at a time
_WORKER: Dict[str, Any] = {}  # in a worker process: the evaluator (forked with the parent's) and the comparing flag


def default_jobs() -> int:
    """Worker processes by default: the CPUs this process may use, at most 8 (1 where fork is not the way)."""
    if not hasattr(os, "fork") or not hasattr(os, "sched_getaffinity"):
        return 1
    return max(1, min(8, len(os.sched_getaffinity(0))))


def _start_worker(parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it ends the workers
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # and it ends them at once (preflight's handler is the parent's)
    # A parent killed outright (SIGTERM's handler leaves with os._exit, or SIGKILL) must not leave workers waiting
    # for work forever: Linux sends this worker SIGTERM when its parent goes (prctl PR_SET_PDEATHSIG).
    import ctypes

    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # gone before that took effect
        os._exit(1)


def _judge_file(path: str) -> Union[NodeInput, read.Unreadable]:
    document = read.read(path)
    if isinstance(document, read.Unreadable):
        return document
    return _WORKER["evaluator"].node(document, _WORKER["comparing"])


def _lost(path: str, why: str) -> read.Unreadable:
    return read.Unreadable(path, "not read: the worker process judging it ended abruptly twice, the last time %s; "
                                 "--jobs 1 reads every file in preflight's own process" % why)


def run(options: CheckOptions, paths: List[str], warn: common.Warn = None, baseline: Optional[str] = None,
        jobs: int = 1) -> Fleet:
    evaluator = Evaluator(options, warn)
    if baseline is not None and os.path.isfile(baseline):
        fleet = Fleet(baseline=baseline_file(baseline))
    else:
        fleet = Fleet(baseline_node=baseline)
    comparing = baseline is not None
    _WORKER.update(evaluator=evaluator, comparing=comparing)  # a forked worker starts with this copy
    parent = os.getpid()
    workers = Workers(jobs, _judge_file, lambda: _start_worker(parent), _lost, CHUNK)

    def judged(names: List[str]) -> Iterator[Union[NodeInput, read.Unreadable]]:
        if jobs > 1 and len(names) >= PARALLEL_FROM:
            return workers.judged(names)
        return map(_judge_file, names)

    try:
        for entry in read.entries(paths, files=judged):
            if isinstance(entry, read.Document):  # from a URL or standard input: judged here
                entry = evaluator.node(entry, comparing)
            if isinstance(entry, read.Unreadable):
                fleet.add_unreadable(entry.path, entry.reason)
            else:
                fleet.add(*entry)
    finally:  # done, or stopped (Ctrl-C, an error): the workers' work is no longer wanted
        workers.stop()
    return fleet


def node_list(fleet: Fleet, wanted: str) -> str:
    """--nodes RULE[:GROUP]: the folded list of the nodes the rule fails or warns on, and nothing else."""
    from preflight.fleet.hostlist import fold

    rule, _, group_text = wanted.partition(":")
    if rule not in fleet.rules:
        raise PreflightError("--nodes %s: %s is not a rule of the nodes read" % (wanted, rule),
                             "rules with problems here: %s" % (", ".join(dict.fromkeys(
                                 entry["rule"] for entry in fleet.ranked(True) + fleet.ranked(False))) or "none"))
    group = int(group_text) if group_text.isdigit() and int(group_text) > 0 else None
    if group_text and group is None:
        raise PreflightError("--nodes %s: the group must be a number from 1" % wanted,
                             "the text report numbers each rule's groups: fix 1 of 3, ...")
    names = fleet.nodes_of(rule, group or 0)
    if names is None and group:
        raise PreflightError("--nodes %s: %s has no group %d" % (wanted, rule, group),
                             "the text report numbers each rule's groups: fix 1 of N")
    return fold(names or [])


def baseline_file(path: str) -> dict:
    """The facts --baseline FILE gives: a report's inventory, or a snapshot's inventory, host and packages."""
    from preflight import inventory

    document = read.read(path)
    if isinstance(document, read.Unreadable):
        raise PreflightError("--baseline %s: %s" % (path, document.reason),
                             "give a node's name as the files name it, or a report or facts file")
    data = document.data
    if document.kind == "report":
        return fingerprint(data.get("inventory") if isinstance(data.get("inventory"), dict) else None)
    return fingerprint(inventory.of(data), data)


def main(options: CheckOptions, paths: List[str], baseline: Optional[str], shown: OutputOptions,
         warn: common.Warn = None, nodes_of: Sequence[str] = (), jobs: Optional[int] = None) -> int:
    from preflight.files.output import emit
    from preflight.render import formats
    from preflight.render.fleet import FleetView

    fleet = run(options, paths, warn, baseline, default_jobs() if jobs is None else jobs)
    if not fleet.nodes:
        reasons = "; ".join("%s: %s" % item for item in fleet.unreadable[:5]) or "no .json or .json.gz file found"
        raise PreflightError("nothing could be read from %s (%s)" % (", ".join(paths), reasons),
                             "give reports (check --format json) or facts snapshots (preflight facts), or folders of "
                             "them")
    if nodes_of:
        lists = [node_list(fleet, wanted) for wanted in nodes_of]  # every one checked before anything is written
        emit("".join("%s\n" % folded if len(nodes_of) == 1 else "%s %s\n" % (wanted, folded)
                     for wanted, folded in zip(nodes_of, lists)), shown.output)
        return ExitCode.OK
    against = fleet.against()
    if baseline and against is None:
        raise PreflightError("--baseline %s: no node of that name was read, and no such file" % baseline,
                             "nodes read: %s" % ", ".join(n.name for n in fleet.nodes[:10]))
    emit(formats.render("fleet", FleetView(fleet, baseline, against), shown.format), shown.output)
    return ExitCode.FAILED if fleet.counts()["failing"] else ExitCode.OK


# --- the command line ----------------------------------------------------------------------------------------

def build() -> click.Command:
    @click.command("fleet")
    @click.argument("paths", nargs=-1, required=True, metavar="PATH|URL|-...", shell_complete=complete_files)
    @click.option("--baseline", metavar="NODE|FILE",
                  help="A known-good node (its name among the files read) or its report or snapshot file: list the "
                       "facts on which each node differs from it.")
    @click.option("--nodes", "nodes_of", metavar="RULE[:GROUP]", multiple=True,
                  help="Print only the folded list of the nodes RULE fails or warns on (GROUP: those given its Nth "
                       "fix, as the report numbers them), to paste into scontrol or pdsh; empty when no node has it. "
                       "Given several times, from one read of the files: a line 'RULE[:GROUP] LIST' for each. "
                       "Exit 0, or 2 when a RULE is not a rule of the nodes read.")
    @click.option("--jobs", type=click.IntRange(1, 256), metavar="N", help="Processes that read and judge the files of a folder or list "
                  "of 200 or more [default: the CPUs preflight may use, at most 8; 1: all in this process].")
    @click.option("--format", "output_format", type=click.Choice(format_names("fleet")),
                  default="text", show_default=True)
    @OUTPUT
    @setting("rules", help="Add or override rules (as check --rules) for the snapshots evaluated here.")
    @check_options(CHECK_WITHOUT_FACTS)
    def fleet(options, paths, baseline, nodes_of, jobs, output_format, output) -> int:
        """Many nodes at once: reports and facts snapshots (files or folders of .json and .json.gz; '-' reads a
        stream of them from standard input; http://HOST:PORT reads a preflight serve's /report, 32 at a time, 10 s
        each), snapshots evaluated here with the same rules and options as check. Which nodes are not ready and why
        (root causes first, each group of nodes with its own fix, node lists folded as Slurm folds them:
        gpu-b[001-040,044]), and the drift."""
        return main(options, list(paths), baseline, shown(output_format, output), warn, list(nodes_of),
                    jobs)
    return fleet
