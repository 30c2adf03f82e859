"""Precision and recall of `preflight diagnose` on real failure texts (tests/corpus/*.txt).

Each corpus file is a failure text users posted publicly, its source in the
first line (``# source: URL``) and the expected first finding in the second
(``# expect: ID``, or ``none`` for clean logs and user-code bugs on which
nothing may fire). The corpus is kept apart from the catalog's own examples.

    python scripts/diagnose_corpus.py [--corpus tests/corpus] [--verbose]

Prints, for the first finding of each text: precision (first findings that
are right, of all texts where something was found) and recall (texts whose
expected failure came first, of all texts that have one).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from typing import Dict, List, NamedTuple, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from preflight.diagnose import diagnosis  # noqa: E402
from preflight.diagnose.scan import Scanner  # noqa: E402
from preflight.engine import loader  # noqa: E402


class Case(NamedTuple):
    name: str
    source: str
    expect: Optional[str]  # None: nothing may fire
    text: str


class Outcome(NamedTuple):
    case: Case
    found: List[str]

    @property
    def first(self) -> Optional[str]:
        return self.found[0] if self.found else None


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
        cases.append(Case(name, header["source"], expect, "\n".join(lines)))
    return cases


def run(cases: List[Case]) -> List[Outcome]:
    ruleset = loader.load(failures=True)
    clues = list(getattr(ruleset, "clues", {}).values())  # older preflights (for comparison) have none
    scanner = Scanner(list(ruleset.failures.values()), clues) if clues else Scanner(list(ruleset.failures.values()))
    outcomes = []
    for case in cases:
        result = scanner.scan(io.BytesIO(case.text.encode("utf-8")))
        outcomes.append(Outcome(case, [f.failure.id for f in diagnosis.findings(result)]))
    return outcomes


def score(outcomes: List[Outcome]) -> Dict[str, float]:
    expected = [o for o in outcomes if o.case.expect]
    fired = [o for o in outcomes if o.first]
    right = [o for o in expected if o.first == o.case.expect]
    clean = [o for o in outcomes if not o.case.expect]
    return {
        "texts": len(outcomes), "with_cause": len(expected), "clean": len(clean),
        "right": len(right), "fired": len(fired),
        "false_alarms": len([o for o in clean if o.first]),
        "precision": len(right) / len(fired) if fired else 1.0,
        "recall": len(right) / len(expected) if expected else 1.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default=os.path.join(os.path.dirname(HERE), "tests", "corpus"))
    parser.add_argument("--verbose", action="store_true", help="one line per text")
    args = parser.parse_args()
    outcomes = run(read_corpus(args.corpus))
    for outcome in outcomes:
        mark = "ok  " if outcome.first == outcome.case.expect else "MISS"
        if args.verbose or mark == "MISS":
            print("%s %-36s expected %-32s found %s" % (mark, outcome.case.name, outcome.case.expect or "none",
                                                        ", ".join(outcome.found) or "nothing"))
    s = score(outcomes)
    print("texts %(texts)d (%(with_cause)d with a known cause, %(clean)d clean or user bugs): first finding right "
          "%(right)d; precision %(precision).3f, recall %(recall).3f; false alarms on clean texts %(false_alarms)d" % s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
