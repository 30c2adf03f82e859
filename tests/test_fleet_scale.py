"""The fleet at cluster scale: root causes, each node's own fix, Slurm-folded node lists, reports from standard
input and from serve URLs, and a real Prometheus over three targets counting nodes, not GPUs."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time

import pytest
import yaml
from conftest import REPO, nvml_fixture, run_cli
from test_serve import Server

LOST = nvml_fixture("8x-h100-one-missing-one-lost.json")
FAULTS = nvml_fixture("8x-h100-hgx-faults.json")
HEALTHY = nvml_fixture("8x-h100-hgx.json")
ECC = nvml_fixture("2x-a100-40g-driver550-ecc.json")


def report(fixture: str, host: str) -> dict:
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", fixture, "--format", "json")
    document = json.loads(completed.stdout)
    document["host"] = host
    return document


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reports")
    for number in (1, 2, 3, 44):
        (folder / ("b%03d.json" % number)).write_text(json.dumps(report(LOST, "gpu-b%03d" % number)))
    (folder / "a07.json").write_text(json.dumps(report(FAULTS, "gpu-a07")))
    (folder / "c01.json").write_text(json.dumps(report(ECC, "gpu-c01")))
    return folder


def test_a_lost_gpu_is_one_root_cause_with_its_consequences(reports):
    fleet = json.loads(run_cli("fleet", str(reports), "--format", "json").stdout)
    failures = {entry["rule"]: entry for entry in fleet["failures"]}
    health = failures["gpu.health"]
    assert health["count"] == 5  # four lost-GPU nodes and the ECC node
    consequences = {c["rule"]: c["nodes"] for c in health["consequences"]}
    assert consequences["gpu.compute_capability"] == 4 and consequences["gpu.memory"] == 4
    # The unknowns a lost GPU causes are not buckets of their own.
    assert "gpu.compute_capability" not in failures and "gpu.memory" not in failures
    node = [n for n in fleet["nodes"] if n["node"] == "gpu-b001"][0]
    assert {p["caused_by"] for p in node["problems"] if p["rule"] == "gpu.memory"} == {"gpu.health"}


def test_nodes_are_grouped_by_their_own_fix_with_their_gpus(reports):
    fleet = json.loads(run_cli("fleet", str(reports), "--format", "json").stdout)
    health = [entry for entry in fleet["failures"] if entry["rule"] == "gpu.health"][0]
    assert len(health["groups"]) == 2, health["groups"]
    lost, ecc = health["groups"]
    assert lost["count"] == 4 and {n["node"] for n in lost["nodes"]} == {"gpu-b001", "gpu-b002", "gpu-b003",
                                                                         "gpu-b044"}
    assert all(n["subjects"] == ["gpu5"] for n in lost["nodes"]) and "lost" in lost["example"]
    assert "--gpu-reset -i 5" in " ".join(lost["fix"]["commands"])
    assert ecc["nodes"] == [{"node": "gpu-c01", "subjects": ["gpu1"]}] and "ECC" in ecc["example"]
    assert "-i 5" not in " ".join(ecc["fix"]["commands"])  # the ECC node's own fix, not the lost GPU's
    text = run_cli("fleet", str(reports)).stdout
    assert "gpu.health fails on 5 nodes" in text and "fix 2 of 2, for 1 node:" in text
    # Each group: its example, its fix, then its nodes, each in one list (per GPU where the rule names one).
    group = text.split("fix 1 of 2, for 4 nodes:", 1)[1].split("fix 2 of 2", 1)[0]
    assert group.count("gpu-b[001-003,044]") == 1 and "gpu5 on: gpu-b[001-003,044]" in group, group
    assert group.index("e.g. ") < group.index("fix: ") < group.index("$ ") < group.index("gpu5 on: "), group
    assert lost["nodes_folded"] == "gpu-b[001-003,044]" and lost["subjects_folded"] == [
        {"subject": "gpu5", "nodes_folded": "gpu-b[001-003,044]"}]


def test_node_lists_fold_as_slurm_folds_them():
    from preflight.fleet.hostlist import expand, fold

    names = ["gpu-b%03d" % n for n in range(1, 41)] + ["gpu-b044", "login1"]
    assert fold(names) == "gpu-b[001-040,044],login1"
    assert expand("gpu-b[001-040,044]") == names[:41]
    assert fold(["x #2", "gpu01"]) == "gpu01,x #2"  # what cannot be folded is listed, never lost


def test_html_has_a_legend_warnings_as_warnings_and_no_columns_of_dots(reports, tmp_path):
    page = run_cli("fleet", str(reports), "--format", "html").stdout
    assert 'id="legend"' in page and "fails a warning-severity rule" in page
    assert 'class="s-failwarn"' in page  # gpu.temperature fails on gpu5 of gpu-a07 at warning severity
    assert "<b>gpu.health</b> fails on 5 nodes &mdash; it checks:" in page
    assert "gpu-b[001-003,044]" in page
    assert "gpu.expected_count" not in page  # no node was given a count: not a column of dots


def test_reports_from_standard_input_as_jsonl_or_one_after_another(reports):
    files = sorted(reports.iterdir())
    jsonl = "".join(json.dumps(json.loads(f.read_text())) + "\n" for f in files)
    pretty = "".join(json.dumps(json.loads(f.read_text()), indent=2) for f in files)
    for stream in (jsonl, pretty):
        completed = run_cli("fleet", "-", "--format", "json", stdin=stream)
        assert completed.returncode == 1 and json.loads(completed.stdout)["summary"]["nodes"] == len(files)
    broken = run_cli("fleet", "-", "--format", "json", stdin=jsonl + "{not json")
    summary = json.loads(broken.stdout)["summary"]
    assert summary["nodes"] == len(files) and summary["unreadable"] == 1


def test_fleet_reads_serve_urls_and_names_the_one_that_is_down(tmp_path):
    servers = [Server("--profile", "node", "--nvml-fixture", fixture, "--interval", "1h")
               for fixture in (HEALTHY, FAULTS)]
    try:
        for server in servers:
            server.wait_for_check()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            dead = "http://127.0.0.1:%d" % probe.getsockname()[1]
        urls = [server.base for server in servers] + [dead]
        completed = run_cli("fleet", *urls, "--format", "json")
        fleet = json.loads(completed.stdout)
        assert completed.returncode == 1 and fleet["summary"]["nodes"] == 2 and fleet["summary"]["unreadable"] == 1
        assert fleet["unreadable"][0]["path"] == dead and "cannot fetch" in fleet["unreadable"][0]["reason"]
        baseline = run_cli("fleet", *urls[:2], "--baseline", str(tmp_path / "none"))
        assert "None" not in baseline.stdout + baseline.stderr
    finally:
        for server in servers:
            server.stop()


def _query(port: int, expression: str):
    import urllib.error

    url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": expression}))
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())["data"]["result"]
    except urllib.error.HTTPError as exc:
        if exc.code == 503:  # Prometheus answers 503 until its storage is open: not an answer yet
            raise ConnectionError("%s: Prometheus is not ready yet" % expression)
        raise AssertionError("%s: %s" % (expression, exc.read().decode()))


@pytest.mark.slow
def test_a_real_prometheus_over_three_targets_counts_nodes(tmp_path, monkeypatch):
    prometheus = shutil.which("prometheus")
    if not prometheus:
        pytest.skip("SKIPPED LOUDLY: Prometheus is not installed here (Debian: apt-get install prometheus); the "
                    "alert and dashboard queries were not run against a real server")
    servers = []
    for name, fixture in (("gpu-h01", HEALTHY), ("gpu-f01", FAULTS)):  # two nodes, named as Kubernetes names them
        monkeypatch.setenv("NODE_NAME", name)
        servers.append(Server("--profile", "node", "--nvml-fixture", fixture, "--interval", "1h"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = "127.0.0.1:%d" % probe.getsockname()[1]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    targets = [s.base.split("//")[1] for s in servers]
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"global": {"scrape_interval": "1s"}, "scrape_configs": [
        {"job_name": "preflight", "static_configs": [{"targets": targets + [dead]}]}]}))
    scraper = subprocess.Popen([prometheus, "--config.file=%s" % config, "--storage.tsdb.path=%s" % (tmp_path / "d"),
                                "--web.listen-address=127.0.0.1:%d" % port], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        for server in servers:
            server.wait_for_check()
        end = time.monotonic() + 90
        while time.monotonic() < end:
            try:
                if len(_query(port, "up")) == 3 and len(_query(port, "preflight_ok")) == 2:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        rules = yaml.safe_load((REPO / "deploy" / "prometheus" / "preflight-rules.yml").read_text())
        alerts = {rule["alert"]: rule["expr"] for group in rules["groups"] for rule in group["rules"]}
        not_ready = _query(port, alerts["PreflightNodeNotReady"])
        assert [(r["metric"]["hostname"], r["metric"]["instance"]) for r in not_ready] == [("gpu-f01", targets[1])]
        down = _query(port, alerts["PreflightTargetDown"])
        assert [r["metric"]["instance"] for r in down] == [dead]
        assert _query(port, alerts["PreflightAbsent"]) == []
        assert _query(port, alerts["PreflightRuleFailingOnManyNodes"]) == []
        inner = alerts["PreflightRuleFailingOnManyNodes"].rsplit("> scalar(", 1)[0]
        per_rule = {r["metric"]["rule"]: r["value"][1] for r in _query(port, inner)}
        assert per_rule["gpu.pcie"] == "1"  # two GPUs fail it on one node: one node
        raw = {r["metric"]["rule"]: r["value"][1] for r in _query(
            port, 'count by (rule) (preflight_rule_status{status="fail", severity="error"} == 1)')}
        assert raw["gpu.pcie"] == "2"  # what the old expression counted
        coverage = _query(port, alerts["PreflightCoverageReduced"])
        assert {r["metric"]["hostname"] for r in coverage} == {"gpu-h01", "gpu-f01"}  # replayed: no kernel log
        dashboard = json.loads((REPO / "deploy" / "grafana" / "preflight-dashboard.json").read_text())
        panels = {p["title"]: p["targets"][0]["expr"] for p in dashboard["panels"]}
        value = lambda title: [r["value"][1] for r in _query(port, panels[title])]  # noqa: E731
        assert value("Nodes ready") == ["1"] and value("Fleet readiness") == ["0.5"]
        assert value("Targets down (checks unknown)") == ["1"]
        assert {r["metric"]["name"]: r["value"][1] for r in _query(port, panels["Drift: GPU models"])} == {
            "NVIDIA H100 80GB HBM3": "2"}  # nodes, not the 16 GPUs
        assert {r["metric"]["rule"]: r["value"][1] for r in _query(port, panels["Nodes failing each rule"])}[
            "gpu.pcie"] == "1"
        # The dcgm-exporter join of docs/kubernetes.md, with a stand-in series labelled as dcgm-exporter labels.
        docs = (REPO / "docs" / "kubernetes.md").read_text()
        join = docs.split("```\nlabel_replace(max by (hostname, gpu, rule)", 1)[1].split("```", 1)[0]
        join = "label_replace(max by (hostname, gpu, rule)" + join
        assert "DCGM_FI_DEV_GPU_TEMP" in join
        stand_in = 'label_replace(preflight_gpu_memory_total_bytes, "Hostname", "$1", "hostname", "(.+)")'
        joined = _query(port, join.replace("DCGM_FI_DEV_GPU_TEMP", stand_in))
        assert {(r["metric"]["gpu"], r["metric"]["rule"]) for r in joined} >= {("2", "gpu.pcie"), ("7", "gpu.pcie")}
        for title, expression in panels.items():  # every panel answers, with 0 where nothing matches
            assert _query(port, expression) or title in ("Nodes not ready",), title
    finally:
        scraper.terminate()
        scraper.wait(10)
        for server in servers:
            server.stop()


class _EarlyTimer(threading.Timer):
    """A watchdog that wakes before time.monotonic() reaches its deadline, as Python 3.8's timed waits do when the
    wall clock is stepped forward (they wait on the wall clock): CI failed on that once."""

    def __init__(self, interval, function, args=None, kwargs=None):
        super().__init__(interval * 0.6, function, args, kwargs)


@pytest.mark.parametrize("timer", ["on time", "waking early"])
def test_a_serve_that_trickles_its_report_is_cut_at_the_deadline(monkeypatch, timer):
    from preflight.fleet import read

    monkeypatch.setattr(read, "URL_TIMEOUT", 2.0)
    if timer == "waking early":
        monkeypatch.setattr(threading, "Timer", _EarlyTimer)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    stop = threading.Event()

    def trickle():
        connection, _ = listener.accept()
        with connection:
            connection.recv(4096)
            connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
            while not stop.is_set():  # one byte every half second: each read is quick, the whole never ends
                try:
                    connection.sendall(b" ")
                except OSError:
                    return
                time.sleep(0.5)

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    started = time.monotonic()
    try:
        completed = run_cli("fleet", "http://127.0.0.1:%d" % listener.getsockname()[1], "--format", "json")
    finally:
        stop.set()
        listener.close()
    assert time.monotonic() - started < 15
    # Nothing else was named, so nothing could be read: exit 2, naming the URL and why.
    assert completed.returncode == 2 and "the report did not arrive within 2 s" in completed.stderr, completed.stderr


# --- node lists an admin can paste, at scale ------------------------------------------------------------------

@pytest.fixture(scope="module")
def scattered(tmp_path_factory):
    """3,000 reports: lost-GPU nodes scattered over three name patterns (so their folded list is long and has
    many ranges), the rest healthy: a stream of reports, one per line, as fleet reads from standard input."""
    import random

    rng = random.Random(40)
    lost, healthy = report(LOST, "x"), report(HEALTHY, "x")
    names = ["gpu-b%04d" % n for n in range(1, 1501)] + ["dgx%03d-ib" % n for n in range(1, 1001)] + \
        ["rack%d-node%02d" % (r, n) for r in range(1, 11) for n in range(1, 51)]
    bad = set(rng.sample(names, 700))
    lines = [json.dumps(dict(lost if name in bad else healthy, host=name)) for name in names]
    path = tmp_path_factory.mktemp("scattered") / "reports.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path, bad


def _text_node_list(text: str, label: str) -> str:
    """The node list after ``label`` in fleet's text, its continuation lines joined back."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(label))
    parts = [lines[start].split(label, 1)[1]]
    indent = len(lines[start]) - len(lines[start].lstrip()) + len(label)
    for line in lines[start + 1:]:
        if not parts[-1].endswith(","):
            break
        assert line[:indent].strip() == "", line  # a continuation line: aligned under the list
        parts.append(line[indent:])
    return "".join(parts)


def test_every_node_list_parses_back_whole_from_text_json_html_and_nodes(scattered):
    from ClusterShell.NodeSet import NodeSet

    path, bad = scattered
    stream = path.read_text()
    document = json.loads(run_cli("fleet", "-", "--format", "json", stdin=stream).stdout)
    health = [entry for entry in document["failures"] if entry["rule"] == "gpu.health"][0]
    assert set(NodeSet(health["nodes_folded"])) == bad
    group = health["groups"][0]
    assert set(NodeSet(group["nodes_folded"])) == {n["node"] for n in group["nodes"]} == bad
    assert [(s["subject"], set(NodeSet(s["nodes_folded"]))) for s in group["subjects_folded"]] == [("gpu5", bad)]
    text = run_cli("fleet", "-", stdin=stream, env={"COLUMNS": "80"}).stdout
    assert "more characters" not in text and " more" not in text.split("DRIFT")[0]
    assert set(NodeSet(_text_node_list(text, "gpu5 on: "))) == bad
    assert "    nodes: " not in text.split("DRIFT")[0]  # the same names once, not twice
    longest = max(len(line) for line in text.splitlines() if "[" in line and "]" in line and "e.g." not in line)
    assert longest <= 80, longest  # broken between ranges, never inside a name
    page = run_cli("fleet", "-", "--format", "html", stdin=stream).stdout
    import re

    lists = re.findall(r'<code class="nodes">(.*?)</code>', page)
    assert len(lists) == 1 and set(NodeSet(lists[0].replace("<wbr>", ""))) == bad
    assert "<wbr>" in lists[0]  # the page may wrap it between ranges
    pasted = run_cli("fleet", "-", "--nodes", "gpu.health", stdin=stream)
    assert pasted.returncode == 0 and pasted.stdout.count("\n") == 1 and set(NodeSet(pasted.stdout.strip())) == bad
    one_group = run_cli("fleet", "-", "--nodes", "gpu.health:1", stdin=stream)
    assert set(NodeSet(one_group.stdout.strip())) == bad


@pytest.mark.slow
def test_a_long_node_list_wraps_on_the_page_after_its_fix_in_a_real_browser(scattered, tmp_path):
    """700 scattered nodes of 3,000: in Chromium at 1,000 pixels wide, the group's fix comes before its node list,
    and the list wraps inside the page (between ranges) instead of running off it on one line."""
    from test_fleet import _browser

    path, bad = scattered
    page_file = tmp_path / "fleet.html"
    completed = run_cli("fleet", "-", "--format", "html", "--output", str(page_file), stdin=path.read_text())
    assert completed.returncode == 1, completed.stderr
    sync_playwright, executable = _browser()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 800})
            page.goto(page_file.as_uri())
            page.locator("details.failure").first.evaluate("d => d.open = true")
            listed = page.locator("details.failure code.nodes").first
            box = listed.bounding_box()
            assert box["x"] + box["width"] <= 1000 and box["height"] > 100, box  # wrapped, many lines tall
            assert page.evaluate("document.documentElement.scrollWidth") <= 1000
            from ClusterShell.NodeSet import NodeSet

            assert set(NodeSet(listed.text_content())) == bad  # the wrap points add nothing to a copy
            order = page.evaluate("""() => {
                const group = document.querySelector('details.failure .group');
                const text = group.innerText;
                return [text.indexOf('Fix:'), text.indexOf('$ '), text.indexOf('gpu5 on: ')];
            }""")
            assert 0 <= order[0] < order[1] < order[2], order
        finally:
            browser.close()


def test_nodes_names_a_rule_of_the_fleet_or_says_which_are(scattered):
    path, _ = scattered
    stream = path.read_text()
    typo = run_cli("fleet", "-", "--nodes", "gpu.helth", stdin=stream)
    assert typo.returncode == 2 and "gpu.helth is not a rule of the nodes read" in typo.stderr \
        and "gpu.health" in typo.stderr and typo.stdout == ""
    no_group = run_cli("fleet", "-", "--nodes", "gpu.health:7", stdin=stream)
    assert no_group.returncode == 2 and "gpu.health has no group 7" in no_group.stderr
    healthy = run_cli("fleet", "-", "--nodes", "nvml.init", stdin=stream)  # a rule every node passes
    assert healthy.returncode == 0 and healthy.stdout == "\n"
    # Several rules from one read: a line each, the rule first.
    both = run_cli("fleet", "-", "--nodes", "gpu.health", "--nodes", "gpu.health:1", "--nodes", "nvml.init",
                   stdin=stream)
    alone = run_cli("fleet", "-", "--nodes", "gpu.health", stdin=stream).stdout.strip()
    assert both.returncode == 0 and both.stdout == "gpu.health %s\ngpu.health:1 %s\nnvml.init \n" % (alone, alone)
    bad = run_cli("fleet", "-", "--nodes", "gpu.health", "--nodes", "gpu.helth", stdin=stream)
    assert bad.returncode == 2 and bad.stdout == ""  # nothing written when one of them is wrong


def test_a_report_kept_under_slurm_names_the_node_as_slurm_does(tmp_path):
    """--report-dir where slurmd's environment names the node: the file and the report carry the Slurm node
    name, and fleet lists the node by it (not by its host name), so its lists paste into scontrol."""
    kept = tmp_path / "kept"
    kept.mkdir()
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", LOST, "--report-dir", str(kept),
                        env={"SLURMD_NODENAME": "gpu-x17"})
    assert completed.returncode == 1, completed.stderr
    document = json.loads((kept / "gpu-x17.json").read_text())
    assert document["node"] == "gpu-x17" and document["host"] != "gpu-x17"
    assert run_cli("fleet", str(kept), "--nodes", "gpu.health").stdout == "gpu-x17\n"


def test_worker_processes_judge_a_folder_as_this_process_does(tmp_path, reports):
    """--jobs 2 over a folder of more files than fleet.PARALLEL_FROM: the same document, node for node, in order."""
    import gzip

    from preflight.commands.fleet import PARALLEL_FROM

    snapshots = [json.loads(run_cli("facts", "--nvml-fixture", fixture).stdout) for fixture in (LOST, ECC, HEALTHY)]
    folder = tmp_path / "nodes"
    folder.mkdir()
    for number in range(PARALLEL_FROM + 40):
        snapshot = dict(snapshots[number % 3], hostname="gpu-n%04d" % number)
        text = json.dumps(snapshot)
        if number % 50 == 7:
            (folder / ("n%04d.json.gz" % number)).write_bytes(gzip.compress(text.encode()))
        else:
            (folder / ("n%04d.json" % number)).write_text(text)
    (folder / "n0100.json").write_text("{not json")  # unreadable, in the middle
    for path in sorted(reports.iterdir()):  # reports among the snapshots
        shutil.copy(str(path), str(folder / ("r-" + path.name)))

    def fleet(*args):  # a process of its own, as users run it: the workers fork it, not the test run
        completed = run_cli("fleet", str(folder), "--format", "json", *args, subprocess_only=True)
        assert completed.returncode == 1 and completed.stderr == "", completed.stderr
        document = json.loads(completed.stdout)
        document.pop("generated_at")
        return document

    alone, workers = fleet("--jobs", "1"), fleet("--jobs", "2")
    assert alone == workers
    assert alone["summary"]["nodes"] == PARALLEL_FROM + 40 - 1 + 6
    assert [u["path"].rsplit("/", 1)[-1] for u in alone["unreadable"]] == ["n0100.json"]
    assert fleet("--jobs", "1", "--baseline", "gpu-n0002") == fleet("--jobs", "2", "--baseline", "gpu-n0002")
    listed = [run_cli("fleet", str(folder), "--nodes", "gpu.health", "--jobs", jobs).stdout for jobs in ("1", "2")]
    assert listed[0] == listed[1] and "gpu-n[" in listed[0]
    assert run_cli("fleet", str(folder), "--jobs", "0").returncode == 2


@pytest.fixture(scope="module")
def many_snapshots(tmp_path_factory):
    """2,000 snapshots: long enough to judge that a signal lands while the workers are at it."""
    folder = tmp_path_factory.mktemp("many")
    snapshot = json.loads(run_cli("facts", "--nvml-fixture", FAULTS).stdout)
    for number in range(2000):
        (folder / ("n%04d.json" % number)).write_text(json.dumps(dict(snapshot, hostname="gpu-n%04d" % number)))
    return folder


@pytest.mark.parametrize("how", ["SIGTERM to the fleet process", "Ctrl-C to its process group"])
def test_a_stopped_fleet_leaves_no_worker_behind(many_snapshots, how):
    import os
    import signal
    import sys

    import psutil

    def default_sigint():  # as on a terminal: a shell's background job would ignore SIGINT
        os.setsid()
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    started = subprocess.Popen([sys.executable, "-m", "preflight", "fleet", str(many_snapshots), "--jobs", "2",
                                "--format", "json", "--output", os.devnull], stderr=subprocess.PIPE,
                               preexec_fn=default_sigint)
    parent = psutil.Process(started.pid)
    deadline = time.monotonic() + 60
    while len(parent.children()) < 2 and started.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = parent.children()
    assert len(workers) == 2, "the workers did not start"
    if how.startswith("SIGTERM"):
        started.send_signal(signal.SIGTERM)
    else:
        os.killpg(started.pid, signal.SIGINT)
    code = started.wait(30)
    assert code == (143 if how.startswith("SIGTERM") else 130), (code, started.stderr.read())
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, "workers left behind: %s" % [w.pid for w in alive]


def _kill_workers(folder, rounds: int):
    """Run fleet --jobs 2 over ``folder`` and SIGKILL one of its workers ``rounds`` times (each round a worker
    of the fresh pool), as the out-of-memory killer would: the fleet's exit code, seconds and JSON document."""
    import os
    import signal
    import sys

    import psutil

    out = folder.parent / ("fleet-%d.json" % rounds)
    started = time.monotonic()
    running = subprocess.Popen([sys.executable, "-m", "preflight", "fleet", str(folder), "--jobs", "2", "--format",
                                "json", "--output", str(out)], stderr=subprocess.PIPE)
    parent, killed, seen = psutil.Process(running.pid), set(), set()
    while len(killed) < rounds and running.poll() is None and time.monotonic() - started < 60:
        workers = [child for child in parent.children() if child.pid not in seen]  # the newest pool's
        if workers:
            time.sleep(0.1)  # at work on its files
            seen |= {child.pid for child in parent.children()}  # the next kill: a worker of a later pool
            workers[0].send_signal(signal.SIGKILL)
            killed.add(workers[0].pid)
        time.sleep(0.02)
    assert len(killed) == rounds, "the fleet ended before %d workers could be killed" % rounds
    code = running.wait(60)  # a hang fails here
    stderr = running.stderr.read().decode()
    assert out.exists(), (code, stderr)
    return code, time.monotonic() - started, json.loads(out.read_text()), stderr


def test_killed_workers_cost_no_file_and_no_wait(many_snapshots):
    """SIGKILL to a worker while it judges (once, and again to a worker of the ones started after): every file
    is still judged, none waited on (the stdlib pools wait forever when a worker dies in the middle of
    answering)."""
    code, seconds, document, stderr = _kill_workers(many_snapshots, 1)
    assert code == 1 and document["summary"]["nodes"] == 2000 and document["unreadable"] == [], stderr
    # The second kill may land on the fresh worker retrying a file of the first one's: that file then ended two
    # workers and is listed as not read, saying so; every other file is judged.
    code, seconds, document, stderr = _kill_workers(many_snapshots, 2)
    unreadable = document["unreadable"]
    assert code == 1 and document["summary"]["nodes"] + len(unreadable) == 2000 and len(unreadable) <= 1, stderr
    assert all("ended abruptly twice, the last time killed by signal 9" in entry["reason"] for entry in unreadable)


def _judge_or_die(path):
    import os
    import signal

    if path == "poison":
        os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer would, on every try
    return path.upper()


def test_a_file_that_kills_every_worker_judging_it_costs_only_itself():
    from preflight.fleet.workers import Workers

    names = ["f%03d" % number for number in range(100)]
    names[37] = "poison"
    workers = Workers(3, _judge_or_die, lambda: None, lambda path, why: ("lost", path, why), chunk=8)
    started = time.monotonic()
    results = list(workers.judged(names))
    assert time.monotonic() - started < 30
    assert results[:37] == [name.upper() for name in names[:37]] and results[38:] == [n.upper() for n in names[38:]]
    assert results[37] == ("lost", "poison", "killed by signal 9 (SIGKILL): the out-of-memory killer ends a "
                                             "process so")
    assert workers.busy == {}  # every worker ended
    # Workers that die before taking any work (here: at start) cost each file two tries, never an endless loop.
    dying = Workers(2, _judge_or_die, _exit_at_start, lambda path, why: why, chunk=4)
    assert list(dying.judged(names[:10])) == ["exited with status 3"] * 10


def _exit_at_start():
    import os

    os._exit(3)
