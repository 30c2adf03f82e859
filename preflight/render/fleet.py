"""preflight fleet for people (text, markdown, html) and programs (json: preflight.fleet/1, csv: a row per node)."""

from __future__ import annotations

import csv
import io
import time
from typing import Any, Dict, List, NamedTuple, Optional

from preflight.fleet import hostlist
from preflight.fleet.aggregate import DRIFT_KEYS, DRIFT_WORDS, MAX_NAMES, SCHEMA, Fleet
from preflight.render.blocks import csv_cell, markdown_text, width, wrap
from preflight.terminal import printable


class FleetView(NamedTuple):
    """What fleet renders: the fleet, and with --baseline the baseline's name and how each node differs from it."""

    fleet: Fleet
    baseline: Optional[str] = None
    against: Optional[List[Dict[str, Any]]] = None

    def to_json(self) -> Dict[str, Any]:
        return as_json(self.fleet, self.baseline, self.against)


def text(view: FleetView) -> str:
    return as_text(view.fleet, view.baseline, view.against)


def markdown(view: FleetView) -> str:
    return as_text(view.fleet, view.baseline, view.against, markdown=True)


def as_json(fleet: Fleet, baseline: Optional[str] = None,
            against: Optional[List[Dict[str, Any]]] = None, nodes: bool = True) -> Dict[str, Any]:
    """fleet --format json's document (``nodes``: False leaves the node list empty, for ``json_text``)."""
    return {
        "schema": SCHEMA,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "summary": fleet.counts(),
        "failures": fleet.ranked(blocking=True),
        "warnings": fleet.ranked(blocking=False),
        "drift": fleet.drift(),
        "baseline": {"node": baseline, "differing": against} if baseline else None,
        "unreadable": [{"path": path, "reason": reason} for path, reason in fleet.unreadable],
        "nodes": [_node_json(n) for n in fleet.nodes] if nodes else [],
    }


def _node_json(node) -> Dict[str, Any]:
    return {"node": node.name, "source": node.source, "state": node.state, "inventory": node.drift,
            "problems": [p._asdict() for p in node.problems]}


def json_text(view: FleetView) -> str:
    """``as_json`` as preflight writes JSON (indented by 2), built node by node: the same text as dumping the
    whole document at once, without the millions of small pieces that costs at 100,000 nodes."""
    from preflight.files.output import json_text as dumps

    document = as_json(view.fleet, view.baseline, view.against, nodes=False)
    head, marker, tail = dumps(document).rpartition('"nodes": []')
    if not view.fleet.nodes or not marker:
        return dumps(view.to_json())
    body = ",\n".join("    " + dumps(_node_json(node)).replace("\n", "\n    ") for node in view.fleet.nodes)
    return "%s\"nodes\": [\n%s\n  ]%s" % (head, body, tail)


def as_csv(view: FleetView) -> str:
    fleet = view.fleet
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["node", "state", "failing_rules", "warning_rules"] + list(DRIFT_KEYS) + ["source"])
    for node in fleet.nodes:
        failing = sorted({p.rule for p in node.problems if p.blocks})
        warning = sorted({p.rule for p in node.problems} - set(failing))
        writer.writerow([csv_cell(cell) for cell in [node.name, node.state, " ".join(failing), " ".join(warning)]
                         + [node.drift.get(key, "") for key in DRIFT_KEYS] + [node.source]])
    for path, reason in fleet.unreadable:
        writer.writerow([csv_cell(cell) for cell in [path, "unreadable", "", reason] + [""] * len(DRIFT_KEYS) + [path]])
    return out.getvalue()


def as_text(fleet: Fleet, baseline: Optional[str], against: Optional[List[Dict[str, Any]]],
            markdown: bool = False, columns: int = 0) -> str:
    """Text or Markdown; text is wrapped to the terminal's width (commands whole), Markdown is left to its viewer."""
    lines = _text_lines(fleet, baseline, against, markdown)
    if markdown:
        return "\n".join(lines).rstrip() + "\n"
    columns = columns or width()
    fitted: List[str] = []
    for line in lines:
        if isinstance(line, NodeList):  # whole, broken only between ranges: every line pastes as it is
            label = printable(line.label)
            chunks = hostlist.lines(printable(line.folded), max(20, columns - len(label)))
            fitted += [(label if index == 0 else " " * len(label)) + chunk for index, chunk in enumerate(chunks)]
            continue
        stripped = line.lstrip()
        indent = line[:len(line) - len(stripped)]
        if stripped.startswith("$ "):
            fitted.append(printable(line))
        else:
            fitted += wrap(stripped, columns, indent, indent + "  ")
    return "\n".join(fitted).rstrip() + "\n"


def node_lists(group: Dict[str, Any]) -> List[tuple]:
    """(label, folded list) of a group's nodes, each node in one list: per GPU (subject) where the rule names
    one ("gpu5 on"), and the nodes it fails on as a whole ("nodes") where it names none."""
    without = [node["node"] for node in group.get("nodes") or [] if not node.get("subjects")]
    lists = [("%s on" % on["subject"], on["nodes_folded"]) for on in group["subjects_folded"]]
    if not lists:
        return [("nodes", group["nodes_folded"])]
    if without:
        lists.append(("other nodes", hostlist.fold(without)))
    return lists


class NodeList(NamedTuple):
    """A folded node list after its label: printed whole, never cut or broken inside a name."""

    label: str
    folded: str


def _nodes(label: str, folded: str, markdown: bool):
    return "%s`%s`" % (label, printable(folded).replace("`", "'")) if markdown else NodeList(label, folded)


def _text_lines(fleet: Fleet, baseline: Optional[str], against: Optional[List[Dict[str, Any]]],
                markdown: bool) -> List[Any]:
    counts = fleet.counts()
    heading = (lambda text: "## " + text) if markdown else (lambda text: text.upper())
    bullet = "- " if markdown else "  "
    # Values come from the nodes' files: Markdown escapes them here; text is made printable when it is wrapped.
    v = markdown_text if markdown else str
    lines = ["%s%d nodes: %d OK, %d failing, %d with warnings; %d files unreadable" % (
        "# " if markdown else "", counts["nodes"], counts["ok"], counts["failing"], counts["warnings"],
        counts["unreadable"]), ""]
    for title, verb, entries in (("Failing rules, by the number of nodes (root causes first)", "fails",
                                  fleet.ranked(True)),
                                 ("Warnings, by the number of nodes", "warns", fleet.ranked(False))):
        if not entries:
            continue
        lines += [heading(title), ""]
        for entry in entries:
            lines.append("%s%s %s on %d node%s (it checks: %s)" % (
                bullet, v(entry["rule"]), verb, entry["count"], "" if entry["count"] == 1 else "s", v(entry["title"])))
            groups = entry.get("groups") or []
            for number, group in enumerate(groups, 1):
                if len(groups) > 1:
                    lines.append("    fix %d of %d, for %d node%s:" % (number, len(groups), group["count"],
                                                                    "" if group["count"] == 1 else "s"))
                lines.append("    e.g. %s" % v(group["example"]))
                fix = group.get("fix")
                if fix:  # what to do before whom to do it on: a list of thousands of names comes last
                    lines.append("    fix: %s" % v(fix.get("title")))
                    lines += ["      - %s" % v(step) for step in fix.get("steps") or []]
                    lines += ["      $ %s" % (("`%s`" % printable(command).replace("`", "'")) if markdown else command)
                              for command in fix.get("commands") or []]
                lines += [_nodes("    %s: " % v(label), folded, markdown) for label, folded in node_lists(group)]
            if entry.get("consequences"):
                lines.append("    also made unknown on the same GPUs (counted here, not on their own): %s" % v(
                    ", ".join("%s (%d node%s)" % (c["rule"], c["nodes"], "" if c["nodes"] == 1 else "s")
                              for c in entry["consequences"])))
        lines.append("")
    lines += [heading("Drift"), ""]
    for key, values in fleet.drift().items():
        shown = "; ".join("%s: %d" % (v(value["value"]), value["count"]) for value in values)
        lines.append("%s%s: %s" % (bullet, DRIFT_WORDS[key], shown))
        for value in values:
            if value["odd"]:
                lines.append(_nodes("    %s on " % v(value["value"]), value["nodes_folded"], markdown))
    lines.append("")
    if baseline:
        lines += [heading("Against %s" % v(baseline)), ""]
        if not against:
            lines.append("%severy node matches %s" % (bullet, v(baseline)))
        for node in against or []:
            changes = "; ".join("%s %s (baseline %s)" % (v(c["fact"]), v(c["node"]), v(c["baseline"]))
                                for c in node["differences"][:12])
            more = len(node["differences"]) - 12
            lines.append("%s%s: %s%s" % (bullet, v(node["node"]), changes, " and %d more" % more if more > 0 else ""))
        lines.append("")
    if fleet.unreadable:
        lines += [heading("Unreadable files"), ""]
        lines += ["%s%s: %s" % (bullet, v(path), v(reason)) for path, reason in fleet.unreadable[:MAX_NAMES]]
        if len(fleet.unreadable) > MAX_NAMES:
            lines.append("%sand %d more" % (bullet, len(fleet.unreadable) - MAX_NAMES))
    return lines


def json_schema() -> Dict[str, Any]:
    """``as_json`` (fleet --format json) as JSON Schema."""
    from preflight.engine import fix
    from preflight.files.json_schema import (
        BOOL,
        INT,
        STATUS,
        STR,
        nullable,
        obj,
        strings,
    )

    group = obj(["fix", "example", "nodes", "count", "nodes_folded", "subjects_folded"], {
        "fix": fix.json_schema(), "example": STR, "count": INT, "nodes_folded": STR,
        "nodes": {"type": "array", "items": obj(["node", "subjects"], {"node": STR, "subjects": strings()})},
        "subjects_folded": {"type": "array", "items": obj(["subject", "nodes_folded"], {
            "subject": STR, "nodes_folded": STR})}})
    entry = obj(["rule", "nodes", "count", "example", "groups", "consequences", "nodes_folded"], {
        "rule": STR, "title": nullable(STR), "severity": nullable(STR), "nodes": strings(), "count": INT,
        "nodes_folded": STR,
        "example": STR, "fix": fix.json_schema(), "groups": {"type": "array", "items": group},
        "consequences": {"type": "array", "items": obj(["rule", "nodes"], {"rule": STR, "nodes": INT})}})
    value = obj(["value", "count", "odd", "nodes", "nodes_folded"], {"value": STR, "count": INT, "odd": BOOL,
                                                                      "nodes": strings(), "nodes_folded": STR})
    problem = obj(["rule", "subject", "status", "severity", "message"], {
        "rule": STR, "subject": STR, "status": STATUS, "severity": STR, "message": STR, "blocks": BOOL,
        "caused_by": STR})
    return obj(["schema", "generated_at", "summary", "failures", "warnings", "drift", "unreadable", "nodes"], {
        "schema": {"const": SCHEMA}, "generated_at": STR,
        "summary": obj(["nodes", "ok", "failing", "warnings", "unreadable"], {
            key: {"type": "integer", "minimum": 0} for key in ("nodes", "ok", "failing", "warnings", "unreadable")}),
        "failures": {"type": "array", "items": entry}, "warnings": {"type": "array", "items": entry},
        "drift": {"type": "object", "additionalProperties": {"type": "array", "items": value}},
        "baseline": nullable(obj(["node", "differing"], {"node": STR, "differing": nullable({"type": "array"})})),
        "unreadable": {"type": "array", "items": obj(["path", "reason"], {"path": STR, "reason": STR})},
        "nodes": {"type": "array", "items": obj(["node", "source", "state", "problems"], {
            "node": STR, "source": STR, "state": {"enum": ["ok", "warnings", "failing"]},
            "inventory": {"type": "object"}, "problems": {"type": "array", "items": problem}})}})
