"""preflight serve over real sockets: probes, scrapes, load, a hung check, SIGTERM, and a real Prometheus."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import NEUTRAL_CWD, clean_env, nvml_fixture, run_cli

H200 = nvml_fixture("h200-driver580.json")
A100X2 = nvml_fixture("2x-a100-40g-driver550-ecc.json")


class Server:
    def __init__(self, *args: str, env=None, preexec=None) -> None:
        environment = clean_env(None)
        environment["PREFLIGHT_CACHE_DIR"] = os.environ.get("PREFLIGHT_CACHE_DIR", "")
        environment.update(env or {})
        self.process = subprocess.Popen([sys.executable, "-m", "preflight", "serve", "--listen", "127.0.0.1:0", *args],
                                        stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=environment,
                                        cwd=NEUTRAL_CWD, preexec_fn=preexec)
        line = self.process.stderr.readline()
        assert "listening on http://127.0.0.1:" in line, line + self.process.stderr.read()
        self.base = line.split("listening on ")[1].split()[0]

    def get(self, path: str, timeout: float = 5.0):
        try:
            with urllib.request.urlopen(self.base + path, timeout=timeout) as response:
                return response.status, response.read().decode("utf-8"), response.headers.get("Content-Type")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode("utf-8"), error.headers.get("Content-Type")

    def wait_for_check(self, deadline: float = 30.0) -> None:
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            if "no check has finished yet" not in self.get("/healthz")[1]:
                return
            time.sleep(0.1)
        raise AssertionError("no check finished within %.0f s" % deadline)

    def stop(self) -> int:
        """SIGTERM; the exit code (what it said last is in ``self.said``)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(10)
            self.said = self.process.stderr.read()
            return code
        finally:
            self.process.stderr.close()
            self.process.stdout.close()


@pytest.fixture
def served():
    started = []

    def start(*args, **kwargs):
        server = Server(*args, **kwargs)
        started.append(server)
        return server
    yield start
    for server in started:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait(5)


def _metric(body: str, name: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    raise AssertionError("%s not in /metrics" % name)


def test_healthy_node_many_requests_one_check(served):
    pytest.importorskip("prometheus_client", reason="SKIPPED LOUDLY: prometheus_client is not installed")
    server = served("--profile", "node", "--nvml-fixture", H200, "--interval", "1h")
    server.wait_for_check()
    status, body, kind = server.get("/healthz")
    assert status == 200 and body.startswith("preflight: OK, ") and "checked " in body and kind.startswith("text/plain")
    paths = ["/healthz", "/metrics", "/report", "/nope"] * 50
    with ThreadPoolExecutor(max_workers=200) as pool:
        answers = list(pool.map(server.get, paths))
    assert [a[0] for a in answers] == [200, 200, 200, 404] * 50
    status, metrics, kind = server.get("/metrics")
    assert kind.startswith("text/plain; version=0.0.4")
    assert _metric(metrics, "preflight_checks_total") == 1  # 200 requests started no check
    assert _metric(metrics, "preflight_ok") == 1 and _metric(metrics, "preflight_last_run_timestamp_seconds") > 0
    report = json.loads(server.get("/report")[1])
    assert report["schema"] == "preflight.report/1" and report["ok"] is True and report["served"]["checks"] == 1
    assert server.stop() == 0 and "preflight serve: stopped" in server.said


def test_failing_node_is_503_with_the_reason(served):
    server = served("--profile", "node", "--nvml-fixture", A100X2, "--interval", "1h")
    server.wait_for_check()
    status, body, _ = server.get("/healthz")
    assert status == 503 and body.startswith("preflight: FAIL gpu.health gpu1 ") and "uncorrected ECC" in body
    assert json.loads(server.get("/report")[1])["ok"] is False


def test_checks_run_every_interval_never_more_often(served):
    pytest.importorskip("prometheus_client", reason="SKIPPED LOUDLY: prometheus_client is not installed")
    server = served("--profile", "node", "--nvml-fixture", H200, "--interval", "1s")
    server.wait_for_check()
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=50) as pool:
        while time.monotonic() - started < 2.5:
            list(pool.map(server.get, ["/metrics"] * 50))
    checks = _metric(server.get("/metrics")[1], "preflight_checks_total")
    elapsed = time.monotonic() - started
    assert 1 <= checks <= elapsed / 1.0 + 2, (checks, elapsed)


def test_a_hung_check_never_blocks_a_request(served, tmp_path):
    pytest.importorskip("prometheus_client", reason="SKIPPED LOUDLY: prometheus_client is not installed")
    stuck = tmp_path / "python"
    stuck.write_text("#!/bin/sh\nexec sleep 60\n")
    stuck.chmod(0o755)
    server = served("--profile", "train", "--nvml-fixture", H200, "--python", str(stuck), "--timeout", "30",
                    "--interval", "1h")
    time.sleep(0.5)
    asked = time.monotonic()
    status, body, _ = server.get("/healthz", timeout=3)
    assert time.monotonic() - asked < 3
    assert status == 503 and "no check has finished yet" in body
    assert _metric(server.get("/metrics", timeout=3)[1], "preflight_check_running_seconds") > 0
    assert server.stop() == 0  # SIGTERM stops it even while a check hangs


def test_the_nfd_file_is_written_after_each_check(served, tmp_path):
    target = tmp_path / "preflight"
    server = served("--profile", "node", "--nvml-fixture", H200, "--interval", "1h", "--nfd-output", str(target))
    server.wait_for_check()
    end = time.monotonic() + 5
    while not target.exists() and time.monotonic() < end:
        time.sleep(0.05)
    assert "preflight.ready=true" in target.read_text()


def test_serve_publishes_the_configured_fit_labels(served, tmp_path):
    site = tmp_path / "site.toml"
    site.write_text('[defaults]\nfit_labels = ["gelan-c:train:640"]\n')
    target = tmp_path / "preflight"
    server = served("--profile", "node", "--nvml-fixture", H200, "--interval", "1h", "--config", str(site),
                    "--nfd-output", str(target))
    server.wait_for_check()
    end = time.monotonic() + 5
    while not target.exists() and time.monotonic() < end:
        time.sleep(0.05)
    plan = json.loads(run_cli("plan", "--workload", "gelan-c", "--gpu", "h200", "--format", "json").stdout)
    assert "preflight.fit.gelan-c.train.640=%d\n" % plan["gpus"][0]["max_batch"] in target.read_text()


def test_bad_listen_addresses_are_clear_errors():
    completed = run_cli("serve", "--listen", "nowhere", subprocess_only=True)
    assert completed.returncode == 2 and "--listen 'nowhere' must be HOST:PORT" in completed.stderr
    completed = run_cli("serve", "--interval", "0s")
    assert completed.returncode == 2 and "--interval must be at least 1s" in completed.stderr


@pytest.mark.slow
def test_a_real_prometheus_scrapes_it(served, tmp_path):
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        pytest.skip("SKIPPED LOUDLY: Prometheus is not installed here (Debian: apt-get install prometheus); "
                    "no real server scrapes preflight serve in this run")
    server = served("--profile", "node", "--nvml-fixture", H200, "--interval", "1h")
    server.wait_for_check()
    body = server.get("/metrics")[1]
    linted = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, text=True, timeout=30)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    target = server.base.split("//")[1]
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: preflight\n"
                      "    static_configs:\n      - targets: ['%s']\n" % target)
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    scraper = subprocess.Popen([prometheus, "--config.file=%s" % config, "--storage.tsdb.path=%s" % (tmp_path / "data"),
                                "--web.listen-address=127.0.0.1:%d" % port], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 60
        value = None
        while time.monotonic() < end and value is None:
            time.sleep(0.5)
            try:
                query = "http://127.0.0.1:%d/api/v1/query?query=preflight_ok" % port
                with urllib.request.urlopen(query, timeout=2) as response:
                    result = json.loads(response.read())["data"]["result"]
                value = result[0]["value"][1] if result else None
            except (OSError, ValueError, KeyError):
                continue
        assert value == "1", "Prometheus did not scrape preflight_ok=1 within 60 s"
    finally:
        scraper.terminate()
        scraper.wait(10)


def test_a_side_output_that_cannot_be_written_is_said_and_serving_goes_on(served, tmp_path):
    server = served("--profile", "node", "--nvml-fixture", H200, "--interval", "1h", "--nfd-output",
                    str(tmp_path / "missing-folder" / "preflight"))
    server.wait_for_check()
    assert server.get("/healthz")[0] == 200
    assert server.stop() == 0
    assert "preflight serve: after the check: --output" in server.said and "does not exist" in server.said


# --- bounded under load and abuse (the red team's cases) -----------------------------------------------

def _threads(pid: int) -> int:
    with open("/proc/%d/status" % pid) as status:
        return int([line for line in status if line.startswith("Threads:")][0].split()[1])


def _raw(base: str, request: bytes, timeout: float = 30.0) -> bytes:
    import socket

    host, port = base.split("//")[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as connection:
        connection.sendall(request)
        data = b""
        while True:
            chunk = connection.recv(65536)
            if not chunk:
                return data
            data += chunk


def _port(server):
    host, port = server.base.split("//")[1].rsplit(":", 1)
    return host, int(port)


def _healthz_within(server, seconds: float) -> bool:
    try:
        return _raw(server.base, b"GET /healthz HTTP/1.0\r\n\r\n", timeout=seconds).startswith(b"HTTP/1.0 200")
    except OSError:
        return False


@pytest.mark.slow
def test_slow_and_idle_clients_never_keep_healthz_from_answering(served):
    """300 half-sent requests, 140 clients trickling a byte a second and 100 idle connections: /healthz is answered
    within 1 s throughout, the process stays at a handful of threads, and a trickling client is cut off once its
    request has not arrived whole within the deadline counted from its first byte (it kept sending all along)."""
    import socket
    import threading

    from preflight.integrations import serve

    server = served("--profile", "node", "--nvml-fixture", H200, "--interval", "1h")
    server.wait_for_check()
    address = _port(server)
    held = []
    for index in range(540):
        connection = socket.create_connection(address, timeout=10)
        if index < 300:
            connection.sendall(b"GET /metr")  # and never the rest
        held.append(connection)
    trickling, cut_after = held[300:440], []
    stop = threading.Event()

    def trickle(connection) -> None:
        started = time.monotonic()
        try:
            while not stop.is_set():
                connection.sendall(b"X")
                stop.wait(1.0)
        except OSError:
            cut_after.append(time.monotonic() - started)

    threads = [threading.Thread(target=trickle, args=(connection,)) for connection in trickling]
    for thread in threads:
        thread.start()
    try:
        answered = []
        for _ in range(12):
            answered.append(_healthz_within(server, 1.0))
            time.sleep(0.5)
        assert all(answered), answered
        assert _threads(server.process.pid) <= 8
        end = time.monotonic() + 15
        while len(cut_after) < len(trickling) and time.monotonic() < end:
            time.sleep(0.2)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert len(cut_after) == len(trickling)
    assert max(cut_after) < serve.REQUEST_DEADLINE + 3.0, max(cut_after)
    closed = 0
    for connection in held[:300] + held[440:]:  # half-sent and idle ones are closed too
        connection.settimeout(30)
        try:
            closed += connection.recv(1) == b""
        except OSError:
            closed += 1
        connection.close()
    assert closed == 400


@pytest.mark.slow
def test_at_the_open_file_limit_new_probes_still_get_in(served):
    """With 256 descriptors, 400 idle connections: the oldest waiting ones are closed to make room."""
    import resource
    import socket

    server = served("--profile", "node", "--nvml-fixture", H200, "--interval", "1h",
                    preexec=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)))
    server.wait_for_check()
    held = [socket.create_connection(_port(server), timeout=10) for _ in range(400)]
    try:
        assert all(_healthz_within(server, 1.0) for _ in range(5))
    finally:
        for connection in held:
            connection.close()


def test_what_is_not_a_request_gets_a_status_and_disconnects_no_traceback(served):
    import socket
    import struct

    env = {"PREFLIGHT_DEBUG": "1"}
    server = served("--profile", "node", "--nvml-fixture", H200, "--interval", "1h", env=env)
    server.wait_for_check()
    assert _raw(server.base, b"GET /healthz HTTP/1.0\r\nX: " + b"a" * 9000 + b"\r\n\r\n").startswith(
        b"HTTP/1.0 431")
    assert _raw(server.base, b"POST /healthz HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.0 501")
    assert _raw(server.base, b"\x16\x03\x01 hello TLS\r\n\r\n").startswith(b"HTTP/1.0 400")
    assert _raw(server.base, b"GET /healthz HTTP/1.1\nHost: x\n\n").startswith(b"HTTP/1.0 200")  # bare newlines
    for _ in range(150):  # ask for the report, then reset the connection before reading it
        connection = socket.create_connection(_port(server), timeout=10)
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.sendall(b"GET /report HTTP/1.0\r\n\r\n")
        connection.close()
    assert _healthz_within(server, 1.0)
    assert server.stop() == 0
    assert "Traceback" not in server.said and "Exception" not in server.said, server.said
    lines = [line for line in server.said.splitlines() if line and not line.startswith("preflight serve: stopped")]
    assert all(line.startswith("preflight serve: ") for line in lines), lines
    assert len(lines) <= 150 + 4


def test_a_thousand_concurrent_scrapes_are_all_answered(served):
    server = served("--profile", "node", "--nvml-fixture", H200, "--interval", "1h")
    server.wait_for_check()
    with ThreadPoolExecutor(max_workers=1000) as pool:
        answers = list(pool.map(lambda _: _raw(server.base, b"GET /metrics HTTP/1.0\r\n\r\n", 60), range(1000)))
    assert all(answer.startswith(b"HTTP/1.0 200") for answer in answers)


def test_head_is_answered_like_get_without_a_body(served):
    server = served("--profile", "node", "--nvml-fixture", H200, "--interval", "1h")
    server.wait_for_check()
    answer = _raw(server.base, b"HEAD /healthz HTTP/1.0\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200") and b"Content-Length: " in head and body == b""


def test_sighup_checks_again_and_does_not_stop_the_server(served, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nset = ["gpu.count.min=1"]\n')
    server = served("--profile", "node", "--nvml-fixture", H200, "--interval", "1h", "--config", str(config))
    server.wait_for_check()
    assert server.get("/healthz")[0] == 200
    config.write_text('[defaults]\nset = ["gpu.count.min=2"]\n')  # the site now wants two GPUs
    server.process.send_signal(signal.SIGHUP)
    end = time.monotonic() + 30
    while time.monotonic() < end and server.get("/healthz")[0] == 200:
        time.sleep(0.1)
    status, body, _ = server.get("/healthz")
    assert status == 503 and "gpu.count" in body and server.process.poll() is None
    assert server.stop() == 0 and "SIGHUP: checking now" in server.said
