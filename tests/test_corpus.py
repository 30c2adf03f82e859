"""diagnose on real failure texts from public threads (tests/corpus), kept apart from the catalog's examples."""

from __future__ import annotations

import importlib.util

from conftest import REPO

_SPEC = importlib.util.spec_from_file_location("diagnose_corpus", str(REPO / "scripts" / "diagnose_corpus.py"))
corpus = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(corpus)

CASES = corpus.read_corpus(str(REPO / "tests" / "corpus"))


def test_the_corpus_is_real_and_large_enough():
    assert len(CASES) >= 40
    assert len([c for c in CASES if c.expect is None]) >= 5  # clean logs and user-code bugs
    for case in CASES:
        assert case.source.startswith("https://"), case.name
        assert case.text.strip(), case.name
    ruleset_examples = set()
    from preflight.engine import loader

    for failure in loader.load(failures=True).failures.values():
        ruleset_examples.update(example.strip() for example in failure.examples)
    # Kept apart from the catalog: no corpus text is one of the catalog's own examples.
    assert not [c.name for c in CASES if c.text.strip() in ruleset_examples]


def test_first_findings_on_the_corpus():
    outcomes = corpus.run(CASES)
    misses = [(o.case.name, o.case.expect, o.found) for o in outcomes if o.first != o.case.expect]
    assert not misses, misses
    score = corpus.score(outcomes)
    assert score["false_alarms"] == 0 and score["precision"] == 1.0 and score["recall"] == 1.0
