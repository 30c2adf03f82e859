"""Every JSON document preflight writes validates against its shipped JSON Schema (draft 2020-12)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import FIXTURES, REPO, nvml_fixture, run_cli

jsonschema = pytest.importorskip("jsonschema", reason="SKIPPED LOUDLY: jsonschema (a test dependency) is missing")


def schema(name):
    completed = run_cli("schema", name)
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    jsonschema.Draft202012Validator.check_schema(document)
    return jsonschema.Draft202012Validator(document)


def valid(name, text):
    document = json.loads(text)
    errors = sorted(schema(name).iter_errors(document), key=lambda e: list(e.path))
    assert not errors, ["%s: %s" % ("/".join(map(str, e.path)), e.message) for e in errors[:5]]
    return document


def test_the_shipped_schemas_are_the_generated_ones():
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "make_schemas.py"), "--check"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = run_cli("schema").stdout
    for name in ("report", "diagnosis", "plan", "facts", "fleet"):
        assert name in listed


@pytest.mark.parametrize("fixture, args", [
    ("h200-driver580.json", ()), ("h200-driver580.json", ("--profile", "node")),
    ("8x-h100-hgx-faults.json", ("--profile", "node")), ("8x-h100-one-missing-one-lost.json",
                                                         ("--profile", "node", "--expect-gpus", "8")),
    ("no-library.json", ()), ("2x-a100-40g-driver550-ecc.json", ("--workload", "yolov9-c", "--batch", "256")),
])
def test_check_reports(fixture, args):
    completed = run_cli("check", "--nvml-fixture", nvml_fixture(fixture), "--format", "json", *args)
    valid("report", completed.stdout)


def test_facts_snapshots():
    for fixture in ("h200-driver580.json", "8x-h100-hgx.json", "no-library.json"):
        valid("facts", run_cli("facts", "--nvml-fixture", nvml_fixture(fixture), "--kernel-log",
                               str(FIXTURES / "kernel-log" / "xid-74-nvlink.log")).stdout)


def family_texts(count):
    """Field-corpus texts whose expected finding is a family's row (the JSON that carries "family" and "key")."""
    texts = [path for path in sorted((REPO / "tests" / "corpus-field").glob("*.txt"))
             if any(line.startswith("# expect:") and "/" in line for line in path.read_text().splitlines()[:8])]
    return texts[:count]


def test_diagnoses():
    logs = sorted((REPO / "tests" / "corpus").glob("*"))[:12] + family_texts(6)
    families = 0
    for log in logs:
        completed = run_cli("diagnose", str(log), "--no-facts", "--format", "json")
        document = valid("diagnosis", completed.stdout)
        families += any(match["confidence"] == "family" for match in document["matches"])
    assert families >= 6
    # With this machine's facts (a replayed H200) the header says whose they are.
    completed = run_cli("diagnose", str(logs[0]), "--format", "json", "--nvml-fixture", nvml_fixture("h200-driver580.json"))
    assert valid("diagnosis", completed.stdout)["facts"]["whose"] in ("machine", "log")


def test_plans():
    for args in (("--workload", "gelan-c"), ("--workload", "yolov9-e", "--task", "inference", "--half"),
                 ("--workload", "gelan-c", "--gpu-memory", "6GiB", "--cc", "8.6"),
                 ("--workload", "gelan-c", "--max-objects", "300", "--nvml-fixture", nvml_fixture("h200-driver580.json"))):
        valid("plan", run_cli("plan", "--format", "json", *args).stdout)


def test_fleet(tmp_path):
    for index, fixture in enumerate(("h200-driver580.json", "2x-a100-40g-driver550-ecc.json")):
        snapshot = json.loads(run_cli("facts", "--nvml-fixture", nvml_fixture(fixture)).stdout)
        snapshot["hostname"] = "n%d" % index
        (tmp_path / ("n%d.json" % index)).write_text(json.dumps(snapshot))
    (tmp_path / "report.json").write_text(run_cli("check", "--nvml-fixture", nvml_fixture("h200-driver580.json"),
                                                  "--format", "json").stdout)
    (tmp_path / "junk.json").write_text("{}")
    document = valid("fleet", run_cli("fleet", str(tmp_path), "--format", "json", "--baseline", "n0").stdout)
    assert document["summary"]["nodes"] == 3 and document["summary"]["unreadable"] == 1


def test_a_document_that_breaks_the_contract_is_caught():
    report = json.loads(run_cli("check", "--nvml-fixture", nvml_fixture("h200-driver580.json"), "--format",
                                "json").stdout)
    report["results"][0]["status"] = "maybe"
    assert list(schema("report").iter_errors(report))


def test_the_snapshot_check_agrees_with_a_full_json_schema_validator():
    """probes/shape.py checks outside snapshots against their JSON Schema with its own small validator (no runtime
    dependency): on a real snapshot and on every leaf of it changed to each other kind of value, it must say what
    jsonschema says (numbers beyond what a fact can be, which it also refuses, are not among the changes)."""
    import jsonschema

    from preflight.facts.snapshot import json_schema
    from preflight.probes import shape

    snapshot = json.loads(run_cli("facts", "--nvml-fixture", nvml_fixture("h200-driver580.json")).stdout)
    full = jsonschema.Draft202012Validator(json_schema())

    def leaves(value, path=()):
        if isinstance(value, dict):
            for key, item in value.items():
                yield from leaves(item, path + (key,))
        elif isinstance(value, list):
            for index, item in enumerate(value[:2]):
                yield from leaves(item, path + (index,))
        else:
            yield path

    def changed(path, new):
        copy = json.loads(json.dumps(snapshot))
        holder = copy
        for part in path[:-1]:
            holder = holder[part]
        holder[path[-1]] = new
        return copy

    compared = 0
    for path in leaves(snapshot):
        if path[0] in ("schema", "inventory"):
            continue
        for new in ("text", 7, 2.5, True, None, [], {}):
            document = changed(path, new)
            ours = shape.problems(document, shape.SNAPSHOT)
            theirs = next(iter(full.iter_errors(document)), None)
            assert (ours is None) == (theirs is None), (path, new, ours, theirs and theirs.message)
            compared += 1
    assert compared > 500, compared
