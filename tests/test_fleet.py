"""preflight fleet: many nodes' reports and snapshots, evaluated centrally, summarised, compared, in five formats;
reports and snapshots that say where and when they were taken."""

from __future__ import annotations

import contextlib
import csv
import gzip
import importlib.util
import io
import json
import shutil

import pytest
from conftest import REPO, nvml_fixture, run_cli, run_json

spec = importlib.util.spec_from_file_location("bench_fleet", str(REPO / "scripts" / "bench_fleet.py"))
bench_fleet = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_fleet)

H200 = nvml_fixture("h200-driver580.json")
A100X2 = nvml_fixture("2x-a100-40g-driver550-ecc.json")


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory):
    """60 generated snapshots (planted failures and drift), two reports, a foreign and a broken file."""
    folder = tmp_path_factory.mktemp("fleet")
    bench_fleet.write_fleet(str(folder), 60, seed=3)
    reports = folder / "reports"
    reports.mkdir()
    for name, fixture in (("report-h200.json", H200), ("report-a100.json", A100X2)):
        done = run_cli("check", "--profile", "node", "--nvml-fixture", fixture, "--format", "json")
        (reports / name).write_text(done.stdout)
    (folder / "foreign.json").write_text('{"hello": "world"}')
    (folder / "broken.json").write_text('{"schema": "preflight.facts/1", ')
    (folder / "notes.txt").write_text("not read: not .json")
    return folder


def fleet(*args, code=None):
    completed = run_cli("fleet", *args)
    if code is not None:
        assert completed.returncode == code, completed.stdout[-2000:] + completed.stderr
    return completed


def test_the_fleet_summary_ranks_failures_and_names_the_nodes(fleet_dir):
    document = json.loads(fleet(str(fleet_dir), "--format", "json", code=1).stdout)
    assert document["schema"] == "preflight.fleet/1"
    summary = document["summary"]
    assert summary["nodes"] == 62 and summary["unreadable"] == 2
    assert summary["ok"] + summary["failing"] + summary["warnings"] == 62 and summary["failing"] > 0
    failures = document["failures"]
    counts = [entry["count"] for entry in failures]
    assert counts == sorted(counts, reverse=True)  # ranked by the nodes they hit
    health = [entry for entry in failures if entry["rule"] == "gpu.health"][0]
    assert health["fix"]["title"] == "Take this GPU out of service and reset it"
    planted = {node["node"] for node in document["nodes"]
               if any(p["rule"] == "gpu.health" for p in node["problems"])}
    assert set(health["nodes"]) == planted and health["count"] == len(planted)
    unreadable = {u["path"].rsplit("/", 1)[-1]: u["reason"] for u in document["unreadable"]}
    assert "neither a preflight report nor a facts snapshot" in unreadable["foreign.json"]
    assert "not JSON" in unreadable["broken.json"]
    names = {node["node"] for node in document["nodes"]}
    assert {"node-00010", "node-00060"} <= names  # gzipped snapshots are read too
    assert "vm" in names or any(n.startswith("report-") for n in names) or len(names) == 62


def test_drift_shows_the_distributions_and_the_odd_nodes(fleet_dir):
    document = json.loads(fleet(str(fleet_dir), "--format", "json").stdout)
    drivers = document["drift"]["driver"]
    assert sum(value["count"] for value in drivers) == 62
    assert drivers[0]["odd"] is False and drivers[0]["nodes"] == []
    odd = [value for value in drivers if value["odd"]]
    assert odd and all(len(value["nodes"]) == value["count"] for value in odd)
    assert set(document["drift"]) == {"driver", "cuda", "gpu_model", "gpu_count", "torch", "python"}
    text = fleet(str(fleet_dir)).stdout
    assert text.startswith("62 nodes: ") and "DRIFT" in text and "driver: 580.159.04: " in text
    assert "FAILING RULES, BY THE NUMBER OF NODES" in text and "fix: Take this GPU out of service" in text


def test_snapshots_are_judged_with_checks_options(fleet_dir):
    document = json.loads(fleet(str(fleet_dir), "--select", "gpu.health", "--format", "json").stdout)
    assert {entry["rule"] for entry in document["failures"]} == {"gpu.health"}
    relaxed = json.loads(fleet(str(fleet_dir), "--set", "driver.version.min=400", "--set",
                               "driver.version.recommended=400", "--select", "driver", "--format", "json").stdout)
    # --set re-judges the snapshots; a report keeps the verdict it was given where it ran (vm: the A100 report).
    flagged = {n for entry in relaxed["failures"] + relaxed["warnings"] for n in entry["nodes"]}
    assert not [n for n in flagged if n.startswith("node-")] and flagged <= {"vm", "vm #2"}
    node = json.loads(fleet(str(fleet_dir), "--profile", "node", "--format", "json").stdout)
    assert "python.packages" not in {entry["rule"] for entry in node["failures"] + node["warnings"]}


def test_baseline_lists_what_differs_from_a_known_good_node(fleet_dir, tmp_path):
    document = json.loads(fleet(str(fleet_dir), "--baseline", "node-00004", "--format", "json").stdout)
    differing = {entry["node"]: entry["differences"] for entry in document["baseline"]["differing"]}
    assert "node-00004" not in differing and document["baseline"]["node"] == "node-00004"
    same_machine = [n for n in differing if n in ("node-00008", "node-00012")]
    for name in same_machine:  # the same recorded machine: differences only where the generator varied it
        assert all(c["fact"].startswith(("inventory.", "package.", "gpu")) for c in differing[name])
    other = differing["node-00001"]  # a different machine
    assert any(c["fact"] == "inventory.gpu_model" for c in other)
    baseline_file = fleet_dir / "node-00004.json"
    by_file = json.loads(fleet(str(fleet_dir), "--baseline", str(baseline_file), "--format", "json").stdout)
    assert {e["node"] for e in by_file["baseline"]["differing"]} == set(differing)
    missing = fleet(str(fleet_dir), "--baseline", "no-such-node", code=2)
    assert "no node of that name was read" in missing.stderr


def test_csv_and_markdown(fleet_dir):
    rows = list(csv.DictReader(io.StringIO(fleet(str(fleet_dir), "--format", "csv").stdout)))
    assert len(rows) == 64 and {row["state"] for row in rows} <= {"ok", "failing", "warnings", "unreadable"}
    failing = [row for row in rows if row["state"] == "failing"]
    assert failing and all(row["failing_rules"] for row in failing)
    markdown = fleet(str(fleet_dir), "--format", "markdown").stdout
    assert markdown.startswith("# 62 nodes") and "## Drift" in markdown


def test_nothing_readable_is_exit_2_and_bad_files_never_stop_the_run(tmp_path):
    (tmp_path / "a.json").write_text("[1, 2")
    completed = fleet(str(tmp_path), code=2)
    assert "nothing could be read" in completed.stderr and "Traceback" not in completed.stderr
    assert fleet(str(tmp_path / "missing-folder"), code=2).stderr
    gz = tmp_path / "b.json.gz"
    gz.write_bytes(b"not gzip")
    assert "a.json" in fleet(str(tmp_path), code=2).stderr


def test_all_ok_fleet_exits_0(tmp_path):
    for index in range(3):
        snapshot = json.loads(run_cli("facts", "--nvml-fixture", H200).stdout)
        snapshot["hostname"] = "ok-%d" % index
        with gzip.open(str(tmp_path / ("ok-%d.json.gz" % index)), "wt") as out:
            out.write(json.dumps(snapshot))
    completed = fleet(str(tmp_path), "--profile", "node", code=0)
    assert completed.stdout.startswith("3 nodes: 3 OK, 0 failing")


def test_repeating_facts_is_a_usage_error_that_points_to_fleet():
    completed = run_cli("check", "--facts", "a.json", "--facts", "b.json")
    assert completed.returncode == 2 and "preflight fleet a.json b.json" in completed.stderr


def test_reports_and_snapshots_say_where_and_when():
    report = run_json("check", "--profile", "node", "--nvml-fixture", H200)
    assert report["host"] and report["preflight_version"] and report["collected_at"].endswith("Z")
    gpu = report["inventory"]["gpus"][0]
    assert gpu["name"] == "NVIDIA H200" and gpu["pci_bus_id"] == "00000000:00:06.0" and gpu["memory_total"] > 0
    assert report["inventory"]["driver"] == {"version": "580.159.04", "cuda": "13.0", "nvml": "ok"}
    assert report["inventory"]["python"] is None  # the node profile does not probe Python
    train = run_json("check", "--nvml-fixture", H200)
    assert train["inventory"]["python"]["version"] and train["inventory"]["torch"] is None
    facts = json.loads(run_cli("facts", "--nvml-fixture", H200).stdout)
    assert facts["hostname"] == report["host"] and facts["inventory"]["gpus"][0]["uuid"] == gpu["uuid"]
    first = run_cli("check", "--nvml-fixture", H200).stdout.splitlines()[0]
    assert first.startswith("preflight ") and " | 1x NVIDIA H200 | driver 580.159.04 (CUDA 13.0) | Python " in first
    assert report["host"] in first


def _browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("SKIPPED LOUDLY: the playwright package is not installed for this Python, so the fleet HTML "
                    "is not opened in a real browser here (CI installs it on Python 3.9 and newer)")
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if not executable:
        pytest.skip("SKIPPED LOUDLY: no chromium here (Debian: apt-get install chromium); the fleet HTML is not "
                    "opened in a real browser")
    return sync_playwright, executable


@contextlib.contextmanager
def _fleet_page(fleet_dir, tmp_path):
    """The fleet's HTML page in headless Chromium (not yet loaded), with the same fleet as JSON."""
    sync_playwright, executable = _browser()
    page_file = tmp_path / "fleet.html"
    fleet(str(fleet_dir), "--format", "html", "--output", str(page_file), code=1)
    document = json.loads(fleet(str(fleet_dir), "--format", "json").stdout)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield browser.new_page(), page_file.as_uri(), document
        finally:
            browser.close()


@pytest.mark.slow
def test_the_html_report_works_in_a_real_browser(fleet_dir, tmp_path):
    with _fleet_page(fleet_dir, tmp_path) as (page, address, document):
        requests, errors = [], []
        page.on("request", lambda request: requests.append(request.url))
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.goto(address)
        assert page.title() == "preflight fleet: 62 nodes, %d failing" % document["summary"]["failing"]
        assert [url for url in requests if not url.startswith("file:")] == []  # self-contained
        assert errors == []
        rows = page.locator("#matrix tbody tr")
        total = rows.count()
        assert 1 < total < 62  # identical nodes share a row
        page.select_option("#state", "failing")
        failing_rows = page.locator("#matrix tbody tr:not(.hidden)").count()
        assert 0 < failing_rows < total
        page.select_option("#state", "all")
        page.fill("#filter", "node-00004")
        assert page.locator("#matrix tbody tr:not(.hidden)").count() == 1
        page.fill("#filter", "")
        first_rule = document["failures"][0]["rule"]
        anchor = "".join(c if c.isalnum() else "-" for c in first_rule)
        details = page.locator("#fix-%s" % anchor)
        assert details.evaluate("d => d.open") is False
        page.locator('#matrix td[data-target^="fix-%s-"]' % anchor).first.click()
        assert details.evaluate("d => d.open") is True
        assert "Take this GPU" in details.inner_text() or details.inner_text()
        # Every clickable cell leads to the group its own row's nodes are in (a lost GPU's unknown results to
        # the lost GPU's fix), read back from the page: the row's nodes and the group's folded list.
        from preflight.fleet.hostlist import expand

        cells = page.evaluate("""() => Array.from(document.querySelectorAll('#matrix td[data-target]')).map(
            td => [td.dataset.target, td.closest('tr').querySelector('th').title])""")
        assert cells
        for target, row_nodes in cells:
            group = set()
            for listed in page.locator("#%s code.nodes" % target).all_text_contents():
                group |= set(expand(listed))
            assert set(row_nodes.split(", ")) <= group, (target, row_nodes, group)
        assert page.locator("svg").count() == 6  # one drift chart per key


@pytest.mark.slow
def test_the_html_legend_colours_and_grouped_rows_in_a_real_browser(fleet_dir, tmp_path):
    """What a reader sees, read from the rendered page (computed styles, click results), not from a screenshot."""
    with _fleet_page(fleet_dir, tmp_path) as (page, address, document):
        page.goto(address)
        legend = page.locator("#legend")
        assert legend.is_visible()
        assert legend.locator("span.key").count() == 7
        background = "e => getComputedStyle(e).backgroundColor"
        failing = page.locator("#matrix td.s-fail").first.evaluate(background)
        warning = page.locator("#matrix td.s-failwarn, #matrix td.s-warn").first.evaluate(background)
        assert failing == "rgb(247, 197, 192)" and warning == "rgb(251, 230, 168)"  # red and amber
        # Each matrix colour is the legend's colour for the same meaning.
        assert legend.locator("span.key.s-fail").evaluate(background) == failing
        assert legend.locator("span.key.s-failwarn").first.evaluate(background) == warning
        # A warning-severity rule's section is drawn as a warning, titled with what fails.
        assert document["warnings"]  # the generated fleet has warning-severity failures (driver.version, ...)
        section = page.locator("details.failure.warning").first
        assert section.evaluate("e => getComputedStyle(e).borderTopColor") == "rgb(231, 198, 106)"
        title = page.locator("details.failure summary").first.inner_text()
        assert " on " in title and "it checks:" in title
        # Identical nodes share a row whose name opens to the folded node list.
        grouped = page.locator("#matrix th.node details").first
        assert grouped.evaluate("d => d.open") is False
        grouped.locator("summary").click()
        assert grouped.evaluate("d => d.open") is True and "node-" in grouped.locator("code").inner_text()
        # No column is skipped (or unreported) on every node: such a column would say nothing.
        columns = page.evaluate("""() => {
            const rows = [...document.querySelectorAll('#matrix tbody tr')];
            const width = rows[0].querySelectorAll('td').length;
            return [...Array(width).keys()].map(i => rows.every(
                r => ['s-skip', 's-none'].includes(r.querySelectorAll('td')[i].className)));
        }""")
        assert columns and not any(columns)


def test_the_site_configuration_applies_per_node(fleet_dir, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nprofile = "node"\n\n[[match]]\nhosts = ["node-0000*"]\nexpect_gpus = 16\n\n'
                      '[[match]]\ngpus = ["*H200*"]\nset = ["gpu.memory.min=200GB"]\n')
    document = json.loads(fleet(str(fleet_dir), "--config", str(config), "--format", "json").stdout)
    failing = {entry["rule"]: set(entry["nodes"]) for entry in document["failures"]}
    assert failing["gpu.expected_count"] == {"node-%05d" % i for i in range(1, 10)}  # only the matched hosts
    h200_nodes = {node["node"] for node in document["nodes"]  # snapshots (reports keep their own verdict)
                  if node["inventory"]["gpu_model"] == "NVIDIA H200" and node["node"].startswith("node-")}
    too_small = {node["node"] for node in document["nodes"]
                 if any(p["rule"] == "gpu.memory" and ">= 200GB" in p["message"] for p in node["problems"])}
    assert h200_nodes and too_small == h200_nodes  # only where the GPUs match
    assert "python.packages" not in failing  # [defaults]: the node profile


def test_devices_pipes_and_odd_reports_never_hang_or_crash_the_run(tmp_path):
    import os

    os.mkfifo(str(tmp_path / "pipe.json"))  # nobody writes to it: reading it would wait forever
    (tmp_path / "odd.json").write_text(json.dumps({
        "schema": "preflight.report/1", "ok": True, "host": None,
        "results": [{"id": "x", "title": "x", "status": "pass", "severity": "error", "subject": "system",
                     "message": "fine", "fix": None}],
        "inventory": {"driver": "580", "gpus": [1, {"name": 7}], "torch": [1]}}))
    (tmp_path / "wrong.json").write_text(json.dumps({
        "schema": "preflight.report/1", "ok": True, "host": 5, "results": [{"id": "x", "status": "pass"}, 3]}))
    document = json.loads(fleet(str(tmp_path), "/dev/zero", "--format", "json", code=0).stdout)
    reasons = {u["path"].rsplit("/", 1)[-1]: u["reason"] for u in document["unreadable"]}
    assert reasons["pipe.json"].startswith("not a regular file") and reasons["zero"].startswith("not a regular file")
    assert reasons["wrong.json"] == "a preflight.report/1 of the wrong shape: 'host' must be a string"
    [node] = document["nodes"]
    assert node["node"] == "odd" and node["inventory"]["driver"] == "none" and node["inventory"]["gpu_count"] == "1"
