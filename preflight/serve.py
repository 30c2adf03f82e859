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

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Optional, Tuple

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
    """Runs ``check`` now and then every ``interval`` seconds after the previous one finished."""

    def __init__(self, check: Callable[[], Report], interval: float, latest: Latest,
                 after: Optional[Callable[[Report], None]] = None) -> None:
        super().__init__(name="preflight-serve-checker", daemon=True)
        self.check = check
        self.interval = interval
        self.latest = latest
        self.after = after
        self.stopping = threading.Event()

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
                    import sys

                    sys.stderr.write("preflight serve: after the check: %s\n" % exc)
                    sys.stderr.flush()
            self.stopping.wait(self.interval)


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
        return 503, json.dumps({"error": error or "no check has finished yet"})
    document: Dict[str, Any] = report.to_json()
    document["served"] = {"age_seconds": round(time.time() - (finished or time.time()), 3), "checks": checks,
                          "last_error": error}
    return 200, json.dumps(document, indent=2)


ROUTES = {"/healthz": (healthz, "text/plain; charset=utf-8"),
          "/metrics": (metrics, "text/plain; version=0.0.4; charset=utf-8"),
          "/report": (report_json, "application/json")}


def make_server(host: str, port: int, latest: Latest) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        server_version = "preflight"

        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
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
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet: probes call it every few seconds
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server
