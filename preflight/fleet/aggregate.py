"""A fleet in summary: which nodes are not ready and why, and how the nodes drift apart.

Each node is added as the results of its check (a report's, or those of a snapshot evaluated centrally) with
its inventory; only a small record per node is kept (its problems, its drift values, and with --baseline its
differences from the baseline), so tens of thousands of nodes fit in memory while their files do not need to.
"""

from __future__ import annotations

import json
import re
from collections import Counter, OrderedDict
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from preflight.fleet.hostlist import fold

SCHEMA = "preflight.fleet/1"
DRIFT_KEYS = ("driver", "cuda", "gpu_model", "gpu_count", "torch", "python")
DRIFT_WORDS = {"driver": "driver", "cuda": "driver CUDA", "gpu_model": "GPU model", "gpu_count": "GPU count",
               "torch": "torch build", "python": "Python"}
PROBLEM = ("fail", "warn", "error")
MAX_NAMES = 50  # unreadable files listed in the text formats (node lists are never cut: they are folded)


class Problem(NamedTuple):
    rule: str
    subject: str
    status: str
    severity: str
    message: str
    blocks: bool  # it makes the node fail (report.blocks, with the node's strictness)
    caused_by: str = ""  # the rule failing on the same subject that made this one unknown (a lost GPU)


class Node(NamedTuple):
    name: str
    source: str
    state: str  # ok, warnings, failing
    problems: Tuple[Problem, ...]
    drift: Dict[str, str]
    statuses: Dict[str, str]  # rule -> worst status over its subjects (the html matrix)
    fixes: Tuple[int, ...] = ()  # per problem, its fix's number in Fleet.fixes (-1: none): each node's own fix


def _causes(problems: List[Problem]) -> List[Problem]:
    """Each unknown result on a subject that fails another rule, marked as caused by it: a lost GPU makes every
    other check of that GPU unknown, and those are its consequences, not problems of their own."""
    failing: Dict[str, str] = {}
    for problem in problems:
        if problem.status == "fail":
            failing.setdefault(problem.subject, problem.rule)
    return [problem._replace(caused_by=failing[problem.subject])
            if problem.status == "error" and failing.get(problem.subject, problem.rule) != problem.rule else problem
            for problem in problems]


_WORST = {"error": 4, "fail": 3, "warn": 2, "pass": 1, "skip": 0}


def _table(value: Any) -> Dict[str, Any]:
    """A report's inventory comes from a file: anything that is not an object reads as empty."""
    return value if isinstance(value, dict) else {}


def _gpus(inventory: Dict[str, Any]) -> List[Dict[str, Any]]:
    gpus = inventory.get("gpus")
    return [gpu for gpu in gpus if isinstance(gpu, dict)] if isinstance(gpus, list) else []


def drift_values(inventory: Optional[Dict[str, Any]]) -> Dict[str, str]:
    if not isinstance(inventory, dict) or not inventory:
        return {key: "not reported" for key in DRIFT_KEYS}
    driver, torch, python = (_table(inventory.get(key)) for key in ("driver", "torch", "python"))
    gpus = _gpus(inventory)
    names = sorted({str(g.get("name") or ("lost GPU" if g.get("lost") else "unknown")) for g in gpus})
    return {
        "driver": str(driver.get("version") or "none"),
        "cuda": str(driver.get("cuda") or "none"),
        "gpu_model": " + ".join(names) or "no GPU",
        "gpu_count": str(len(gpus)),
        "torch": ("%s (CUDA %s)" % (torch.get("version") or "unknown", torch.get("cuda") or "none")) if torch else "none",
        "python": str(python.get("version") or "not probed"),
    }


def _shown(value: Any) -> str:
    """A fact's value for --baseline: a missing one reads "not reported", never Python's None."""
    return "not reported" if value is None else str(value)


def kept(results: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """What Fleet.add reads of a node's results: a problem whole, of any other result its rule, status, title and
    severity (fleet's worker processes hand back no more)."""
    return [result if result.get("status") in PROBLEM else {key: result.get(key) for key in KEPT_OF_OTHERS}
            for result in results]


KEPT_OF_OTHERS = ("id", "status", "title", "severity")
BASELINE_SECTIONS = ("host", "python")  # what fingerprint reads of a snapshot besides its inventory


def fingerprint(inventory: Optional[Dict[str, Any]], facts: Optional[Dict[str, Any]] = None) -> Dict[str, str]:
    """The facts a node is compared on with --baseline, flattened to "key: value"."""
    found = dict(("inventory.%s" % key, value) for key, value in drift_values(inventory).items())
    for gpu in _gpus(_table(inventory)):
        found["gpu%s.name" % gpu.get("index")] = _shown(gpu.get("name"))
        found["gpu%s.memory_total" % gpu.get("index")] = _shown(gpu.get("memory_total"))
        found["gpu%s.compute_capability" % gpu.get("index")] = _shown(gpu.get("compute_capability"))
    if facts:
        host = facts.get("host") if isinstance(facts.get("host"), dict) else {}
        for key, path in (("host.cpu.count", ("cpu", "count")), ("host.memory.total", ("memory", "total")),
                          ("host.shm.total", ("shm", "total")), ("host.container", ("container", "kind"))):
            value: Any = host
            for step in path:
                value = value.get(step) if isinstance(value, dict) else None
            found[key] = _shown(value)
        python = facts.get("python") if isinstance(facts.get("python"), dict) else {}
        for name, package in sorted((python.get("packages") or {}).items()):
            if isinstance(package, dict):
                found["package.%s" % name] = _shown(package.get("version"))
    return found


def _by_subject(nodes: List[Dict[str, Any]]) -> List[Dict[str, str]]:
    """Per GPU (subject) that fails, the nodes it fails on, folded: one line per GPU index, not per node."""
    on: Dict[str, List[str]] = {}
    for node in nodes:
        for subject in node["subjects"]:
            on.setdefault(subject, []).append(node["node"])
    def natural(subject: str) -> List[Tuple[int, Any]]:
        return [(0, int(part)) if part.isdigit() else (1, part) for part in re.findall(r"\d+|\D+", subject)]

    return [{"subject": subject, "nodes_folded": fold(on[subject])} for subject in sorted(on, key=natural)]


def differences(baseline: Dict[str, str], node: Dict[str, str]) -> List[Dict[str, str]]:
    return [{"fact": key, "baseline": baseline.get(key, "(absent)"), "node": node.get(key, "(absent)")}
            for key in sorted(set(baseline) | set(node)) if baseline.get(key) != node.get(key)]


class Fleet:
    def __init__(self, baseline: Optional[Dict[str, str]] = None, baseline_node: Optional[str] = None) -> None:
        """``baseline``: a known-good node's facts (from its file), or ``baseline_node``: its name among the nodes
        read. Each node is compared as it comes and only its differences are kept; nodes read before the
        named baseline keep their facts until it arrives."""
        self.baseline = baseline
        self.baseline_node = baseline_node
        self._waiting: "OrderedDict[str, Dict[str, str]]" = OrderedDict()
        self._differing: Dict[str, List[Dict[str, str]]] = {}
        self.nodes: List[Node] = []
        self.unreadable: List[Tuple[str, str]] = []
        self.rules: "OrderedDict[str, Dict[str, Any]]" = OrderedDict()  # rule -> title, severity, first fix
        self._names: Counter = Counter()
        self.fixes: List[Dict[str, Any]] = []  # each distinct fix once; nodes refer to them by number
        self._fix_numbers: Dict[str, int] = {}
        # Each distinct problem, drift and status table kept once and shared by the nodes that have it: a fleet's
        # memory grows with its kinds of nodes, not with its nodes (never changed once made).
        self._shared: Dict[Any, Any] = {}

    def add(self, name: Optional[str], source: str, results: List[Dict[str, Any]], strict: bool,
            inventory: Optional[Dict[str, Any]], facts: Optional[Dict[str, Any]] = None) -> Node:
        """A node judged by the one verdict policy (``report.blocks``) over its results, as ``check`` judges."""
        from preflight.report import blocks

        base = name or source.rsplit("/", 1)[-1].split(".json")[0]
        self._names[base] += 1
        shown = base if self._names[base] == 1 else "%s #%d" % (base, self._names[base])
        problems = []
        fixes: List[int] = []
        statuses: Dict[str, str] = {}
        for result in results:
            rule, status = str(result.get("id")), str(result.get("status"))
            known = self.rules.setdefault(rule, {"title": result.get("title") or rule, "fix": None,
                                                 "severity": result.get("severity")})
            if _WORST.get(status, 0) > _WORST.get(statuses.get(rule, "skip"), 0) or rule not in statuses:
                statuses[rule] = status
            if status in PROBLEM:
                severity = str(result.get("severity"))
                problems.append(Problem(rule, str(result.get("subject")), status, severity,
                                        str(result.get("message")), blocks(status, severity, strict)))
                fixes.append(self._fix_number(result.get("fix")))
                if known["fix"] is None and result.get("fix"):
                    known["fix"] = result["fix"]
        problems = [self._share(problem) for problem in _causes(problems)]
        state = "failing" if any(p.blocks for p in problems) else ("warnings" if problems else "ok")
        node = Node(shown, source, state, self._share(tuple(problems)), self._share(drift_values(inventory)),
                    self._share(statuses), self._share(tuple(fixes)))
        self.nodes.append(node)
        if self.baseline is not None or self.baseline_node is not None:
            self._compare(shown, fingerprint(inventory, facts))
        return node

    def _share(self, value: Any) -> Any:
        """The one kept copy of an equal value (a dict's copy found by its items)."""
        key = (dict, tuple(value.items())) if isinstance(value, dict) else value
        return self._shared.setdefault(key, value)

    def _fix_number(self, fix: Any) -> int:
        if not isinstance(fix, dict):
            return -1

        key = json.dumps(fix, sort_keys=True)
        number = self._fix_numbers.get(key)
        if number is None:
            number = self._fix_numbers[key] = len(self.fixes)
            self.fixes.append(fix)
        return number

    def _compare(self, name: str, facts: Dict[str, str]) -> None:
        if self.baseline is None and name == self.baseline_node:
            self.baseline = facts
            for waiting, their in self._waiting.items():
                self._note(waiting, their)
            self._waiting.clear()
        elif self.baseline is None:
            self._waiting[name] = facts
        else:
            self._note(name, facts)

    def _note(self, name: str, facts: Dict[str, str]) -> None:
        changes = differences(self.baseline or {}, facts)
        if changes:
            self._differing[name] = changes

    def add_unreadable(self, path: str, reason: str) -> None:
        self.unreadable.append((path, reason))

    # --- what the renderers show ------------------------------------------------------

    def counts(self) -> Dict[str, int]:
        states = Counter(node.state for node in self.nodes)
        return {"nodes": len(self.nodes), "ok": states["ok"], "failing": states["failing"],
                "warnings": states["warnings"], "unreadable": len(self.unreadable)}

    def ranked(self, blocking: bool = True) -> List[Dict[str, Any]]:
        """Rules whose problems block a node (or, ``blocking=False``, only warn), by the number of nodes they hit:
        root causes only (an unknown result a failing rule caused on the same GPU is counted under that rule, as
        one of its consequences). Each rule's nodes are grouped by the fix they were given, every group with its
        own example and each node with the GPUs that fail."""
        hit: "OrderedDict[str, Dict[str, Any]]" = OrderedDict()
        for node in self.nodes:
            mine: "OrderedDict[str, Dict[str, Any]]" = OrderedDict()
            for problem, fix in zip(node.problems, node.fixes or (-1,) * len(node.problems)):
                if problem.caused_by:
                    continue
                if problem.blocks != blocking:
                    continue
                entry = mine.setdefault(problem.rule, {"fix": fix, "example": problem.message, "subjects": []})
                if problem.subject != "system":
                    entry["subjects"].append(problem.subject)
            caused = Counter((p.caused_by, p.rule) for p in node.problems if p.caused_by)
            for rule, found in mine.items():
                entry = hit.setdefault(rule, {"rule": rule, "nodes": [], "example": found["example"], "groups": {},
                                              "consequences": Counter()})
                entry["nodes"].append(node.name)
                group = entry["groups"].setdefault(found["fix"], {"fix": self.fixes[found["fix"]] if found["fix"] >= 0
                                                                  else None, "example": found["example"], "nodes": []})
                group["nodes"].append({"node": node.name, "subjects": found["subjects"]})
                for (cause, consequence), count in caused.items():
                    if cause == rule:
                        entry["consequences"][consequence] += 1
        ranked = sorted(hit.values(), key=lambda entry: (-len(entry["nodes"]), entry["rule"]))
        for entry in ranked:
            known = self.rules.get(entry["rule"], {})
            groups = sorted(entry["groups"].values(), key=lambda group: -len(group["nodes"]))
            for group in groups:
                group["count"] = len(group["nodes"])
                group["nodes_folded"] = fold(n["node"] for n in group["nodes"])
                group["subjects_folded"] = _by_subject(group["nodes"])
            entry["nodes_folded"] = fold(entry["nodes"])
            entry.update(count=len(entry["nodes"]), title=known.get("title"), severity=known.get("severity"),
                         fix=groups[0]["fix"] if groups else known.get("fix"), groups=groups,
                         consequences=[{"rule": rule, "nodes": count}
                                       for rule, count in entry["consequences"].most_common()])
        return ranked

    def drift(self) -> Dict[str, List[Dict[str, Any]]]:
        """Per drift key, each value with its node count (most common first) and, for the others, the nodes."""
        result: Dict[str, List[Dict[str, Any]]] = {}
        for key in DRIFT_KEYS:
            values: Dict[str, List[str]] = {}
            for node in self.nodes:
                values.setdefault(node.drift.get(key, "not reported"), []).append(node.name)
            ordered = sorted(values.items(), key=lambda item: (-len(item[1]), item[0]))
            result[key] = [{"value": value, "count": len(names), "odd": index > 0, "nodes": names if index else [],
                            "nodes_folded": fold(names) if index else ""}
                           for index, (value, names) in enumerate(ordered)]
        return result

    def against(self) -> Optional[List[Dict[str, Any]]]:
        """For each node that differs from the baseline: the facts, with both values; None when no baseline was
        given, or the named one was never read."""
        if self.baseline is None:
            return None
        return [{"node": node.name, "differences": self._differing[node.name]} for node in self.nodes
                if node.name in self._differing]

    def nodes_of(self, rule: str, group: int = 0) -> Optional[List[str]]:
        """The nodes ``rule`` fails or warns on (``group``: only those given its Nth fix, from 1), as fleet
        ranks them; None when no node has the rule, or there is no such group."""
        for entry in self.ranked(True) + self.ranked(False):
            if entry["rule"] == rule:
                if not group:
                    return list(entry["nodes"])
                groups = entry["groups"]
                return [n["node"] for n in groups[group - 1]["nodes"]] if group <= len(groups) else None
        return None

    def matrix(self, split=None) -> Tuple[List[str], List[Dict[str, Any]]]:
        """(rules, rows): nodes with the same status on every rule collapsed into one row (and, with ``split``, a
        function of the node, the same value of it)."""
        rules = list(self.rules)
        groups: "OrderedDict[Tuple[Any, ...], Dict[str, Any]]" = OrderedDict()
        for node in sorted(self.nodes, key=lambda n: ({"failing": 0, "warnings": 1, "ok": 2}[n.state], n.name)):
            key = tuple(node.statuses.get(rule, "none") for rule in rules)
            if split is not None:
                key = key + (split(node),)
            group = groups.setdefault(key, {"statuses": list(key[:len(rules)]), "nodes": [], "state": node.state,
                                            "messages": {}})
            group["nodes"].append(node.name)
            for problem in node.problems:
                group["messages"].setdefault(problem.rule, "%s %s: %s" % (node.name, problem.subject, problem.message))
        return rules, list(groups.values())
