"""preflight fleet as one self-contained HTML file: no network, no external assets.

A summary; the failing rules, each opening its fix; a node x rule matrix coloured by status (nodes with the
same status on every rule share a row), filterable by name, rule and state, whose failing cells open their
rule's fix; and the drift as inline SVG bar charts. Everything is rendered here; the small script only
filters and opens.
"""

from __future__ import annotations

import html
from typing import Any, Dict, List

from preflight import __version__
from preflight.fleet.aggregate import DRIFT_WORDS, Fleet
from preflight.render.fleet import node_lists

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
.cards{display:flex;gap:1em}.card{padding:.6em 1em;border-radius:6px;background:#f3f3f3}
.card b{display:block;font-size:1.6em}.card.failing b{color:#b3261e}.card.warnings b{color:#9a6700}
.card.ok b{color:#1a7f37}
details.failure{border:1px solid #ddd;border-radius:6px;margin:.4em 0;padding:.3em .8em}
details.failure[open]{background:#fff8f6}details summary{cursor:pointer}
code,pre{font:12px ui-monospace,monospace}pre{background:#f6f8fa;padding:.5em;white-space:pre-wrap}
table{border-collapse:collapse}th,td{border:1px solid #e0e0e0;padding:2px 4px;text-align:center}
th.rule{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:normal;font-size:12px;white-space:nowrap;
vertical-align:bottom;height:13em}
th.node{text-align:left;font-weight:normal;max-width:28em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
td.s-pass{background:#d1f0d9}td.s-fail{background:#f7c5c0;cursor:pointer}td.s-error{background:#e8b4f0;cursor:pointer}
td.s-warn,td.s-failwarn{background:#fbe6a8;cursor:pointer}td.s-skip,td.s-none{background:#f5f5f5;color:#999}
.legend{display:flex;flex-wrap:wrap;gap:.4em 1.2em;margin:.5em 0;font-size:13px}
.legend span.key{display:inline-block;min-width:1.6em;text-align:center;border:1px solid #e0e0e0;margin-right:.3em}
.legend .s-pass{background:#d1f0d9}.legend .s-fail{background:#f7c5c0}.legend .s-failwarn{background:#fbe6a8}
.legend .s-error{background:#e8b4f0}.legend .s-skip{background:#f5f5f5;color:#999}
details.failure.warning{border-color:#e7c66a}details.failure.warning[open]{background:#fffbea}
.group{border-left:3px solid #ddd;padding-left:.8em;margin:.6em 0}
th.node details summary{list-style:none}
.filters{margin:.5em 0;display:flex;gap:.6em}.hidden{display:none}
.chart{display:inline-block;margin:0 2em 1em 0;vertical-align:top}
"""

_SCRIPT = """
(function(){
  var filter=document.getElementById('filter'), state=document.getElementById('state');
  function apply(){
    var text=filter.value.toLowerCase(), wanted=state.value, shown=0;
    document.querySelectorAll('#matrix tbody tr').forEach(function(row){
      var match=(!text||row.dataset.search.indexOf(text)>=0)&&(wanted==='all'||row.dataset.state===wanted);
      row.classList.toggle('hidden',!match); if(match){shown++;}
    });
    document.getElementById('shown').textContent=shown;
  }
  filter.addEventListener('input',apply); state.addEventListener('change',apply);
  document.querySelectorAll('#matrix td[data-target]').forEach(function(cell){
    cell.addEventListener('click',function(){
      var group=document.getElementById(cell.dataset.target);
      if(group){var details=group.closest('details');if(details){details.open=true;}group.scrollIntoView();}
    });
  });
  apply();
})();
"""

_SYMBOL = {"pass": "&#10003;", "fail": "&#10007;", "error": "!", "warn": "~", "skip": "&#183;", "none": ""}


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _folded(folded: str) -> str:
    """A folded node list that wraps on the page between its ranges (never inside a name) and copies whole."""
    return _e(folded).replace(",", ",<wbr>")


def _anchor(rule: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in rule)


def _group_id(rule: str, number: int, kind: str) -> str:
    """A group's id: a rule can fail on some nodes and only warn on others, so its two lists are apart."""
    return "%s-%s-%d" % ("fix" if kind == "failing" else "warn", _anchor(rule), number)


def _targets(fleet: Fleet, document: Dict[str, Any]) -> Dict[Any, str]:
    """(rule, node) -> the id of the group that node is in for that rule; an unknown result a failing rule caused
    on the same GPU (a lost GPU) leads to the group of that cause, where its fix is."""
    targets: Dict[Any, str] = {}
    for kind, entries in (("failing", document["failures"]), ("warning", document["warnings"])):
        for entry in entries:
            for number, group in enumerate(entry.get("groups") or [], 1):
                for node in group["nodes"]:
                    targets[(entry["rule"], node["node"])] = _group_id(entry["rule"], number, kind)
    for node in fleet.nodes:
        for problem in node.problems:
            if problem.caused_by and (problem.caused_by, node.name) in targets:
                targets.setdefault((problem.rule, node.name), targets[(problem.caused_by, node.name)])
    return targets


def _failures(entries: List[Dict[str, Any]], kind: str) -> List[str]:
    """Each failing rule titled by what fails ("gpu.health fails on 21 nodes"), its nodes grouped by the fix
    they were given, each group with its own example, nodes (folded as Slurm folds them, whole) and, per GPU
    index, the nodes it fails on."""
    out = []
    verb = "fails" if kind == "failing" else "warns"
    for entry in entries:
        colour = kind if kind == "warning" or entry.get("severity") != "warning" else "warning"
        groups = []
        for group in entry.get("groups") or []:
            fix = group.get("fix") or {}
            steps = "".join("<li>%s</li>" % _e(step) for step in fix.get("steps") or [])
            commands = "\n".join("$ %s" % command for command in fix.get("commands") or [])
            lists = "".join('<li>%s: <code class="nodes">%s</code></li>' % (_e(label), _folded(folded))
                            for label, folded in node_lists(group))
            groups.append(
                '<div class="group" id="%s"><p>%s<b>%d node%s</b></p><p>e.g. %s</p>%s%s%s<ul>%s</ul></div>' % (
                    _group_id(entry["rule"], len(groups) + 1, kind),
                    "Fix %d of %d, " % (len(groups) + 1, len(entry["groups"])) if len(entry["groups"]) > 1 else "",
                    group["count"], "" if group["count"] == 1 else "s", _e(group["example"]),
                    "<p>Fix: <b>%s</b></p>" % _e(fix["title"]) if fix.get("title") else "",
                    "<ol>%s</ol>" % steps if steps else "", "<pre>%s</pre>" % _e(commands) if commands else "",
                    lists))
        consequences = ", ".join("%s (%d node%s)" % (c["rule"], c["nodes"], "" if c["nodes"] == 1 else "s")
                                 for c in entry.get("consequences") or [])
        out.append(
            '<details class="failure %s" id="%s-%s"><summary><b>%s</b> %s on %d node%s &mdash; it checks: %s'
            "</summary>%s%s</details>" % (
                colour, "fix" if kind == "failing" else "warn", _anchor(entry["rule"]), _e(entry["rule"]), verb,
                entry["count"],
                "" if entry["count"] == 1 else "s", _e(entry.get("title") or ""), "".join(groups),
                "<p>Also made unknown on the same GPUs (counted here, not on their own): %s</p>" % _e(consequences)
                if consequences else ""))
    return out


_LEGEND = ('<div class="legend" id="legend"><b>Legend:</b>'
           '<span><span class="key s-pass">&#10003;</span>passes</span>'
           '<span><span class="key s-fail">&#10007;</span>fails (an error: the node is not ready)</span>'
           '<span><span class="key s-failwarn">&#10007;</span>fails a warning-severity rule</span>'
           '<span><span class="key s-failwarn">~</span>warns</span>'
           '<span><span class="key s-error">!</span>unknown (could not be checked)</span>'
           '<span><span class="key s-skip">&#183;</span>skipped (does not apply)</span>'
           '<span><span class="key s-none"></span>not reported by that node</span>'
           '<span>rows: nodes with the same status on every rule, folded as Slurm folds names; open a row for its '
           'nodes</span></div>')


def _matrix(fleet: Fleet, targets: Dict[Any, str]) -> List[str]:
    from preflight.fleet.hostlist import fold

    # Nodes share a row only where each cell leads to the same group (the same fix).
    rules, rows = fleet.matrix(split=lambda node: tuple(targets.get((rule, node.name), "") for rule in fleet.rules))
    # A rule no node checked (skipped everywhere, e.g. no expected GPU count given) is no column of dots.
    shown = [index for index, rule in enumerate(rules)
             if any(row["statuses"][index] not in ("skip", "none") for row in rows)]
    rules = [rules[index] for index in shown]
    severity = {rule: (fleet.rules.get(rule) or {}).get("severity") for rule in rules}
    out = [_LEGEND,
           '<div class="filters"><input id="filter" type="search" placeholder="filter by node or rule" size="30">'
           '<select id="state"><option value="all">all nodes</option><option value="failing">failing</option>'
           '<option value="warnings">with warnings</option><option value="ok">OK</option></select>'
           '<span><span id="shown">%d</span> of %d rows</span></div>' % (len(rows), len(rows)),
           '<table id="matrix"><thead><tr><th>nodes</th>%s</tr></thead><tbody>' % "".join(
               '<th class="rule" title="%s">%s</th>' % (_e(rule), _e(rule)) for rule in rules)]
    for row in rows:
        names = row["nodes"]
        statuses = [row["statuses"][index] for index in shown]
        search = " ".join(names + [r for r, s in zip(rules, statuses) if s in ("fail", "warn", "error")])
        cells = []
        for rule, status in zip(rules, statuses):
            drawn = "failwarn" if status == "fail" and severity.get(rule) == "warning" else status
            target = targets.get((rule, names[0])) if status in ("fail", "warn", "error") else None
            clickable = ' data-target="%s"' % target if target else ""
            title = row["messages"].get(rule) or "%s: %s" % (rule, status)
            cells.append('<td class="s-%s" title="%s"%s>%s</td>' % (drawn, _e(title), clickable, _SYMBOL[status]))
        if len(names) == 1:
            label = _e(names[0])
        else:
            label = "<details><summary>%s &hellip; (%d nodes)</summary><code>%s</code></details>" % (
                _e(names[0]), len(names), _e(fold(names)))
        out.append('<tr data-state="%s" data-search="%s"><th class="node" title="%s">%s</th>%s</tr>' % (
            row["state"], _e(search.lower()), _e(", ".join(names)), label, "".join(cells)))
    out.append("</tbody></table>")
    return out


def _chart(key: str, values: List[Dict[str, Any]]) -> str:
    """A horizontal bar chart as inline SVG: one bar per value, the most common first."""
    shown = values[:12]
    most = max([v["count"] for v in shown] + [1])
    height = 22 * len(shown) + 28
    bars = []
    for index, value in enumerate(shown):
        y = 24 + 22 * index
        width = max(2, int(220 * value["count"] / most))
        colour = "#8c959f" if not value["odd"] else "#d4a72c"
        bars.append('<text x="0" y="%d" font-size="12">%s</text><rect x="200" y="%d" width="%d" height="16" '
                    'fill="%s"><title>%s: %d node(s)</title></rect><text x="%d" y="%d" font-size="12">%d</text>' % (
                        y + 12, _e(value["value"][:30]), y, width, colour, _e(value["value"]), value["count"],
                        206 + width, y + 12, value["count"]))
    return ('<div class="chart"><svg xmlns="http://www.w3.org/2000/svg" width="480" height="%d" role="img" '
            'aria-label="%s"><text x="0" y="14" font-weight="bold" font-size="13">%s</text>%s</svg></div>' % (
                height, _e(DRIFT_WORDS[key]), _e(DRIFT_WORDS[key]), "".join(bars)))


def render(view) -> str:
    """The fleet (a render.fleet.FleetView) as one self-contained HTML page."""
    fleet, document = view.fleet, view.to_json()
    counts = document["summary"]
    cards = "".join('<div class="card %s"><b>%d</b>%s</div>' % (kind, counts[kind], word) for kind, word in (
        ("nodes", "nodes"), ("ok", "OK"), ("failing", "failing"), ("warnings", "with warnings"),
        ("unreadable", "unreadable files")))
    parts = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
             '<meta name="viewport" content="width=device-width, initial-scale=1">'
             '<title>preflight fleet: %d nodes, %d failing</title><style>%s</style></head><body>' % (
                 counts["nodes"], counts["failing"], _STYLE),
             "<h1>preflight fleet</h1><p>%s; preflight %s</p>" % (_e(document["generated_at"]), _e(__version__)),
             '<div class="cards">%s</div>' % cards]
    if document["failures"]:
        parts += ["<h2>Failing rules</h2>"] + _failures(document["failures"], "failing")
    if document["warnings"]:
        parts += ["<h2>Warnings</h2>"] + _failures(document["warnings"], "warning")
    parts += ["<h2>Nodes &times; rules</h2>"] + _matrix(fleet, _targets(fleet, document))
    parts += ["<h2>Drift</h2>"] + [_chart(key, values) for key, values in document["drift"].items()]
    baseline = document.get("baseline")
    if baseline:
        parts.append("<h2>Against %s</h2>" % _e(baseline["node"]))
        rows = "".join("<tr><th class=\"node\">%s</th><td style=\"text-align:left\">%s</td></tr>" % (
            _e(node["node"]), _e("; ".join("%s: %s (baseline %s)" % (c["fact"], c["node"], c["baseline"])
                                           for c in node["differences"])))
                       for node in baseline["differing"] or [])
        parts.append("<table>%s</table>" % rows if rows else "<p>Every node matches it.</p>")
    if document["unreadable"]:
        parts.append("<h2>Unreadable files</h2><ul>%s</ul>" % "".join(
            "<li><code>%s</code>: %s</li>" % (_e(u["path"]), _e(u["reason"])) for u in document["unreadable"]))
    parts.append("<script>%s</script></body></html>" % _SCRIPT)
    return "".join(parts)
