"""How `preflight diagnose` does on real failure texts from public threads.

Two corpora, measured separately:

- tests/corpus: texts collected while the catalog's entries were written. It
  guards against regressions; it does not measure the field.
- tests/corpus-field: texts from threads no entry was written from, collected
  to measure the field (see its README).

Each text is a failure users posted publicly, with a header:

    # source: URL
    # expect: ID | ID/KEY | none
    # resolution_keywords: words, from, the thread's resolution   (or "(none: why)")
    # missed: why                     (optional) a known gap, kept as evidence and counted in the scores

``expect`` is the first finding wanted (``none`` for clean logs and user-code
bugs, on which nothing may fire); a family finding is ``ID/KEY`` (the row of
its table, e.g. ``cuda.runtime_error/cudaErrorLaunchTimeout``), and a plain
``ID`` accepts any row. ``resolution_keywords`` are filled from the thread's
own resolution before running: the fix "matches the resolution" when it names
every word of one of them.

    python scripts/diagnose_corpus.py [--corpus DIR ...] [--verbose] [--json]

Prints per corpus: precision (first findings that are right, of all texts
where something was found), recall (texts whose expected failure came first,
of all texts that have one), false alarms (clean texts where something was
found), how many right first findings have a fix that matches the thread's
resolution, and in how many of those the fix's first step (its title, first
step and first command: what it asks the user to do first) already does.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from typing import Dict, List, NamedTuple, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from preflight.diagnose import diagnosis  # noqa: E402
from preflight.diagnose.scan import Scanner  # noqa: E402
from preflight.engine import loader  # noqa: E402

CORPORA = ("tests/corpus", "tests/corpus-field", "tests/corpus-heldout")


class Case(NamedTuple):
    name: str
    source: str
    expect: Optional[str]  # None: nothing may fire
    text: str
    keywords: List[str] = []
    missed: str = ""  # "# missed: why": a known gap, kept as evidence; the tests do not require it found


class Outcome(NamedTuple):
    case: Case
    found: List[str]
    fix_text: str = ""  # the first finding's cause, context and fix, as shown
    first_step: str = ""  # what the fix asks the user to do first: its title, first step and first command

    @property
    def first(self) -> Optional[str]:
        return self.found[0] if self.found else None

    @property
    def right(self) -> bool:
        expect = self.case.expect
        return bool(expect) and self.first is not None and (
            self.first == expect or ("/" not in expect and self.first.startswith(expect + "/")))

    @property
    def fix_matches(self) -> bool:
        """A keyword matches when every word of it appears in what the finding shows (any order, any case)."""
        return _names_one(self.fix_text, self.case.keywords)

    @property
    def first_step_matches(self) -> bool:
        """Whether the first thing the fix asks for is what resolved the thread (not a later step or an aside)."""
        return _names_one(self.first_step, self.case.keywords)


def _names_one(text: str, keywords: List[str]) -> bool:
    """A keyword matches when every word of it appears in the text (any order, any case)."""
    text = text.lower()
    return any(all(word in text for word in keyword.lower().split()) for keyword in keywords)


def read_corpus(folder: str) -> List[Case]:
    cases = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".txt"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            lines = handle.read().split("\n")
        header = {}
        while lines and lines[0].startswith("# ") and ":" in lines[0]:
            key, _, value = lines.pop(0)[2:].partition(":")
            header[key.strip()] = value.strip()
        if "source" not in header or "expect" not in header:
            raise ValueError("%s: needs '# source: URL' and '# expect: ID|none' first" % name)
        expect = None if header["expect"] == "none" else header["expect"]
        said = header.get("resolution_keywords", "")
        # "(none: ...)" says the thread was read and has no resolution to compare with.
        keywords = [] if said.startswith("(") else [k.strip() for k in said.split(",") if k.strip()]
        cases.append(Case(name, header["source"], expect, "\n".join(lines), keywords, header.get("missed", "")))
    return cases


def _key(finding) -> str:
    return getattr(finding, "key", None) or finding.failure.id  # older preflights have no families


def _shown(finding) -> str:
    fix = finding.fix or {}
    parts = [finding.failure.cause if not hasattr(finding, "cause") else finding.cause]
    parts += list(finding.context) + [fix.get("title") or ""] + list(fix.get("steps") or [])
    parts += list(fix.get("commands") or [])
    return "\n".join(p for p in parts if p)


def _first_step(finding) -> str:
    fix = finding.fix or {}
    parts = [fix.get("title") or ""] + list(fix.get("steps") or [])[:1] + list(fix.get("commands") or [])[:1]
    return "\n".join(p for p in parts if p)


def run(cases: List[Case]) -> List[Outcome]:
    ruleset = loader.load(failures=True)
    clues = list(getattr(ruleset, "clues", {}).values())  # older preflights (for comparison) have none
    entries = ruleset.log_entries() if hasattr(ruleset, "log_entries") else list(ruleset.failures.values())
    scanner = Scanner(entries, clues) if clues else Scanner(entries)
    outcomes = []
    for case in cases:
        result = scanner.scan(io.BytesIO(case.text.encode("utf-8")))
        found = diagnosis.findings(result)
        if found:
            diagnosis.complete(found, ruleset, None, None, result)  # the log's own values only, no machine
        outcomes.append(Outcome(case, [_key(f) for f in found], _shown(found[0]) if found else "",
                                _first_step(found[0]) if found else ""))
    return outcomes


def score(outcomes: List[Outcome]) -> Dict[str, float]:
    expected = [o for o in outcomes if o.case.expect]
    fired = [o for o in outcomes if o.first]
    right = [o for o in expected if o.right]
    clean = [o for o in outcomes if not o.case.expect]
    judged = [o for o in right if o.case.keywords]
    return {
        "texts": len(outcomes), "with_cause": len(expected), "clean": len(clean),
        "recognised": len([o for o in expected if o.first]), "right": len(right), "fired": len(fired),
        "false_alarms": len([o for o in clean if o.first]),
        "precision": len(right) / len(fired) if fired else 1.0,
        "recall": len(right) / len(expected) if expected else 1.0,
        "fix_judged": len(judged), "fix_matches": len([o for o in judged if o.fix_matches]),
        "first_step_matches": len([o for o in judged if o.first_step_matches]),
    }


def report(name: str, outcomes: List[Outcome], verbose: bool) -> Dict[str, float]:
    for outcome in outcomes:
        mark = "ok  " if (outcome.right if outcome.case.expect else not outcome.first) else "MISS"
        if outcome.right and outcome.case.keywords and not outcome.fix_matches:
            mark = "fix?"
        elif outcome.right and outcome.case.keywords and not outcome.first_step_matches:
            mark = "1st?"
        if verbose or mark != "ok  ":
            print("%s %-44s expected %-46s found %s" % (mark, outcome.case.name, outcome.case.expect or "none",
                                                        ", ".join(outcome.found) or "nothing"))
    s = score(outcomes)
    print("%s: %d texts (%d failures, %d clean or user bugs): recognised %d, first finding right %d; precision "
          "%.3f, recall %.3f; false alarms %d of %d; the fix matches the thread's resolution in %d of %d, its first "
          "step in %d" % (name, s["texts"], s["with_cause"], s["clean"], s["recognised"], s["right"], s["precision"],
                          s["recall"], s["false_alarms"], s["clean"], s["fix_matches"], s["fix_judged"],
                          s["first_step_matches"]))
    return s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(HERE)
    parser.add_argument("--corpus", action="append", help="a corpus folder (repeatable; default: both corpora)")
    parser.add_argument("--verbose", action="store_true", help="one line per text")
    parser.add_argument("--json", action="store_true", help="the scores as JSON (after the lines)")
    args = parser.parse_args()
    scores = {}
    for folder in args.corpus or [os.path.join(root, c) for c in CORPORA]:
        name = os.path.relpath(folder, root) if folder.startswith(root) else folder
        scores[name] = report(name, run(read_corpus(folder)), args.verbose)
    if args.json:
        print(json.dumps(scores, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
