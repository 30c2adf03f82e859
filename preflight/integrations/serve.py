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

import asyncio
import os
import socket
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple

from preflight.files.output import json_text
from preflight.report import Report
from preflight.terminal import say


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
                    say("preflight serve: after the check: %s" % exc)
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
    # When the check finished is the report's preflight_last_run_timestamp_seconds: one metric, not two.
    lines += ["# HELP preflight_checks_total Checks run since the server started.",
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


# Every connection is a coroutine on one event loop, so an idle or slow client costs a socket and a few kilobytes,
# never a thread: hundreds of them cannot keep /healthz from being answered. A request's head must arrive whole
# within REQUEST_DEADLINE of its first byte (a client trickling a byte every few seconds is dropped), a connection
# that sends nothing is closed after IDLE_TIMEOUT, and at MAX_CONNECTIONS open the oldest one still waiting for its
# request is closed to make room: new probes always get in.
LISTEN_BACKLOG = 1024
IDLE_TIMEOUT = 5.0
REQUEST_DEADLINE = 5.0
WRITE_DEADLINE = 10.0
HEAD_LIMIT = 8192  # bytes of request line and headers; GET and HEAD have no body


def max_connections() -> int:
    """Stay clear of the open-file limit (the listening socket, rule files, NVML and probes need descriptors too)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 512
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(16, min(4096, soft - 128))


def listening_socket(host: str, port: int) -> socket.socket:
    """Bound and listening now, so a taken port is an error before anything runs (OSError)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=LISTEN_BACKLOG)


def _debug(line: str) -> None:
    if os.environ.get("PREFLIGHT_DEBUG"):
        say("preflight serve: %s" % line)


class _BadRequest(Exception):
    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


def parse_head(head: bytes) -> Tuple[str, str]:
    """The method and path of a request head (request line and headers); _BadRequest when it is not HTTP/1.x."""
    line = head.split(b"\n", 1)[0].rstrip(b"\r")
    parts = line.split()
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise _BadRequest(400, "not an HTTP/1.x request line")
    try:
        method, target = parts[0].decode("ascii"), parts[1].decode("ascii")
    except UnicodeDecodeError:
        raise _BadRequest(400, "the request line is not ASCII")
    return method, target.split("?", 1)[0]


def answer(latest: Latest, method: str, path: str) -> Tuple[int, str, str]:
    """(status, content type, body) for one request."""
    if method not in ("GET", "HEAD"):
        return 501, "text/plain; charset=utf-8", "preflight serve answers GET and HEAD only\n"
    route = ROUTES.get(path)
    if route is None:
        return 404, "text/plain; charset=utf-8", "not found: try /healthz, /metrics or /report\n"
    status, body = route[0](latest)
    return status, route[1], body


def response_bytes(status: int, kind: str, body: bytes, with_body: bool) -> bytes:
    from email.utils import formatdate
    from http import HTTPStatus

    head = ("HTTP/1.0 %d %s\r\nServer: preflight\r\nDate: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
            % (status, HTTPStatus(status).phrase, formatdate(usegmt=True), kind, len(body)))
    return head.encode("ascii") + (body if with_body else b"")


class HttpServer:
    """/healthz, /metrics and /report on ``sock`` until ``stop()``; one request per connection (HTTP/1.0)."""

    def __init__(self, sock: socket.socket, latest: Latest, idle_timeout: float = IDLE_TIMEOUT,
                 request_deadline: float = REQUEST_DEADLINE, connections: Optional[int] = None) -> None:
        self.sock = sock
        self.latest = latest
        self.idle_timeout = idle_timeout
        self.request_deadline = request_deadline
        self.connections = connections or max_connections()
        self.open: Dict[Any, bool] = {}  # transport -> whether its request has arrived, oldest first
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.stopping: Optional[asyncio.Event] = None
        self.stop_requested = False

    @property
    def address(self) -> Tuple[str, int]:
        return self.sock.getsockname()[:2]

    def serve_forever(self) -> None:
        asyncio.run(self._serve())

    def stop(self) -> None:
        """From a signal handler or another thread."""
        self.stop_requested = True
        if self.loop is not None and self.stopping is not None:
            self.loop.call_soon_threadsafe(self.stopping.set)

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.loop.set_exception_handler(lambda loop, context: _debug("event loop: %s" % context.get("message")))
        self.stopping = asyncio.Event()
        if self.stop_requested:
            return
        self.sock.setblocking(False)
        accepting = asyncio.ensure_future(self._accept())
        await self.stopping.wait()
        accepting.cancel()
        for transport in list(self.open):
            transport.abort()

    async def _accept(self) -> None:
        """One connection at a time, and only with room for it: the process never runs out of descriptors."""
        loop = asyncio.get_running_loop()
        handlers = set()  # the event loop keeps only weak references to tasks
        while True:
            await self._make_room()
            try:
                connection, _ = await loop.sock_accept(self.sock)
                reader, writer = await asyncio.open_connection(sock=connection, limit=HEAD_LIMIT)
            except OSError as exc:  # EMFILE from descriptors outside the count, or a client gone before accept
                _debug("accepting a connection: %s" % exc)
                await asyncio.sleep(0.05)
                continue
            self.open[writer.transport] = False
            handler = asyncio.ensure_future(self._connection(reader, writer))
            handlers.add(handler)
            handler.add_done_callback(handlers.discard)

    async def _make_room(self) -> None:
        while len(self.open) >= self.connections:
            waiting = [transport for transport, answered in self.open.items() if not answered]
            if waiting:
                waiting[0].abort()  # the oldest connection still waiting for its request
                self.open.pop(waiting[0], None)
            else:
                await asyncio.sleep(0.01)  # every one is being answered: wait for one to finish

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        transport = writer.transport
        peer = writer.get_extra_info("peername")
        try:
            try:
                first = await asyncio.wait_for(reader.read(1), self.idle_timeout)
                if not first:
                    return  # connected and left: a TCP probe
                head = first + await asyncio.wait_for(self._rest_of_head(reader, first), self.request_deadline)
                method, path = parse_head(head)
                status, kind, body = answer(self.latest, method, path)
            except _BadRequest as bad:
                method, status, kind, body = "GET", bad.status, "text/plain; charset=utf-8", "%s\n" % bad
            self.open[transport] = True
            writer.write(response_bytes(status, kind, body.encode("utf-8"), method != "HEAD"))
            await asyncio.wait_for(writer.drain(), WRITE_DEADLINE)
            writer.close()
        except asyncio.TimeoutError:
            _debug("%s: closed: no whole request in time" % (peer,))
            transport.abort()
        except (ConnectionError, OSError) as exc:
            _debug("%s: the client went away: %s" % (peer, exc))
            transport.abort()
        finally:
            self.open.pop(transport, None)

    @staticmethod
    async def _rest_of_head(reader: asyncio.StreamReader, first: bytes) -> bytes:
        """Up to the empty line that ends the headers; _BadRequest when longer than HEAD_LIMIT or cut short."""
        head = b""
        line = first
        while True:
            try:
                chunk = await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError:
                raise _BadRequest(431, "the request head is longer than %d bytes" % HEAD_LIMIT)
            except asyncio.IncompleteReadError:
                raise _BadRequest(400, "the request ended before its headers did")
            line += chunk
            head += chunk
            if len(head) > HEAD_LIMIT:
                raise _BadRequest(431, "the request head is longer than %d bytes" % HEAD_LIMIT)
            if line in (b"\r\n", b"\n"):
                return head
            line = b""
