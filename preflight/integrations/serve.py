"""A long-running check behind HTTP: the latest result for Kubernetes probes and Prometheus scrapes.

One background thread runs the check every interval, and only that thread does: requests never start a check,
however many arrive (200 at once serve the same result). Requests read the latest finished result under a
lock, so a check whose probe hangs never holds one up: the previous result is served with its age, and
``/metrics`` shows how long the running check has taken.

    /healthz  200 when the latest check passed, 503 when it failed or none has finished; one line of text
    /metrics  the Prometheus exposition of --format prometheus, plus when the check ran and how many ran
    /report   the latest report as JSON (preflight.report/1, with "served": its age)
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Optional, Tuple

from preflight.files.output import json_text
from preflight.report import Report


class Latest:
    """The newest finished check, and the state of the one running now."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.report: Optional[Report] = None
        self.error: Optional[str] = None
        self.finished: Optional[float] = None
        self.checks = 0
        self.running_since: Optional[float] = None

    def snapshot(self) -> Tuple[Optional[Report], Optional[str], Optional[float], int, Optional[float]]:
        with self.lock:
            return self.report, self.error, self.finished, self.checks, self.running_since


class Checker(threading.Thread):
    """Runs ``check`` now and then every ``interval`` seconds after the previous one finished; ``now()`` starts
    the next one at once (SIGHUP: the site configuration and rule files are read again by every check)."""

    def __init__(self, check: Callable[[], Report], interval: float, latest: Latest,
                 after: Optional[Callable[[Report], None]] = None) -> None:
        super().__init__(name="preflight-serve-checker", daemon=True)
        self.check = check
        self.interval = interval
        self.latest = latest
        self.after = after
        self.stopping = threading.Event()
        self.wake = threading.Event()

    def now(self) -> None:
        self.wake.set()

    def run(self) -> None:
        while not self.stopping.is_set():
            with self.latest.lock:
                self.latest.running_since = time.time()
            report, error = None, None
            try:
                report = self.check()
            except Exception as exc:  # a bad check is served as an error, never kills the server
                error = "%s: %s" % (type(exc).__name__, exc)
            with self.latest.lock:
                self.latest.running_since = None
                self.latest.checks += 1
                self.latest.finished = time.time()
                if report is not None:
                    self.latest.report, self.latest.error = report, None
                else:
                    self.latest.error = error
            if report is not None and self.after is not None:
                try:
                    self.after(report)
                except Exception as exc:  # a side output (the NFD file): say so, and keep checking and serving

                    sys.stderr.write("preflight serve: after the check: %s\n" % exc)
                    sys.stderr.flush()
            self.wake.wait(self.interval)
            self.wake.clear()


def _age(finished: Optional[float]) -> str:
    return "never" if finished is None else "%.0f s ago" % max(0.0, time.time() - finished)


def healthz(latest: Latest) -> Tuple[int, str]:
    report, error, finished, _, running = latest.snapshot()
    if report is None:
        why = "the check failed to run: %s" % error if error else "no check has finished yet"
        return 503, "preflight: UNKNOWN: %s" % why
    counts = report.counts()
    age = "checked %s" % _age(finished)
    if error:
        age += "; the last check failed to run (%s), this is the one before" % error
    blind = ["%s (%s)" % (check, seen["why"]) for check, seen in report.coverage().items() if not seen["covered"]]
    if blind:
        age += "; not covered: %s" % "; ".join(blind)
    if report.ok:
        return 200, "preflight: OK, %d passed, %d warning(s) (%s)" % (counts["pass"], counts["warn"], age)
    return 503, "preflight: FAIL %s (%s)" % (report.reason(160), age)


def metrics(latest: Latest) -> Tuple[int, str]:
    from preflight.render import prometheus

    report, error, finished, checks, running = latest.snapshot()
    lines = []
    if report is not None:
        lines.append(prometheus.render(report).rstrip("\n"))
    lines += ["# HELP preflight_last_check_timestamp_seconds When the latest check finished (seconds since the epoch).",
              "# TYPE preflight_last_check_timestamp_seconds gauge",
              "preflight_last_check_timestamp_seconds %.3f" % (finished or 0),
              "# HELP preflight_checks_total Checks run since the server started.",
              "# TYPE preflight_checks_total counter",
              "preflight_checks_total %d" % checks,
              "# HELP preflight_check_running_seconds How long the check running now has taken (0: none running).",
              "# TYPE preflight_check_running_seconds gauge",
              "preflight_check_running_seconds %.3f" % (time.time() - running if running else 0.0),
              "# HELP preflight_check_errors Whether the latest check failed to run (1) or ran (0).",
              "# TYPE preflight_check_errors gauge",
              "preflight_check_errors %d" % (1 if error else 0)]
    return 200, "\n".join(lines) + "\n"


def report_json(latest: Latest) -> Tuple[int, str]:
    report, error, finished, checks, _ = latest.snapshot()
    if report is None:
        return 503, json_text({"error": error or "no check has finished yet"})
    document: Dict[str, Any] = report.to_json()
    document["served"] = {"age_seconds": round(time.time() - (finished or time.time()), 3), "checks": checks,
                          "last_error": error}
    return 200, json_text(document)


ROUTES = {"/healthz": (healthz, "text/plain; charset=utf-8"),
          "/metrics": (metrics, "text/plain; version=0.0.4; charset=utf-8"),
          "/report": (report_json, "application/json")}


# Connections are handled by at most this many threads at once; more wait in the listen backlog, which is sized
# for a scrape fleet (the kernel caps it at net.core.somaxconn). A connection that sends nothing for
# READ_TIMEOUT seconds is closed, so half-sent requests cannot hold the threads.
MAX_CONNECTION_THREADS = 128
LISTEN_BACKLOG = 1024
READ_TIMEOUT = 5.0


class _Server(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True

    def __init__(self, address, handler, threads: int) -> None:
        self.slots = threading.BoundedSemaphore(threads)
        super().__init__(address, handler)

    def process_request(self, request, client_address) -> None:
        self.slots.acquire()  # at the limit, accepting waits here and new connections queue in the backlog
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def make_server(host: str, port: int, latest: Latest, threads: int = MAX_CONNECTION_THREADS,
                read_timeout: float = READ_TIMEOUT) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        server_version = "preflight"
        timeout = read_timeout  # per connection: a client that stops sending is dropped

        def _answer(self, with_body: bool) -> None:
            route = ROUTES.get(self.path.split("?", 1)[0])
            if route is None:
                status, body, kind = 404, "not found: try /healthz, /metrics or /report\n", "text/plain; charset=utf-8"
            else:
                status, body = route[0](latest)
                kind = route[1]
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if with_body:
                self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            self._answer(True)

        def do_HEAD(self) -> None:  # noqa: N802 - as GET, without the body (load balancers and probes use it)
            self._answer(False)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet: probes call it every few seconds
            pass

    family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class Server(_Server):
        address_family = family

    return Server((host, port), Handler, threads)
