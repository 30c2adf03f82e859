"""preflight serve: check every interval and serve the latest result over HTTP (/healthz, /metrics, /report)."""

from __future__ import annotations

import signal
from typing import Optional

from preflight.commands import common
from preflight.commands.options import CheckOptions
from preflight.errors import ExitCode, PreflightError
from preflight.terminal import say


def parse_listen(text: str):
    """``HOST:PORT`` (``:10480`` and ``0.0.0.0:10480``; ``[::1]:10480`` for IPv6) -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise PreflightError("--listen %r must be HOST:PORT" % text, "for example --listen 0.0.0.0:10480")
    return host.strip("[]") or "0.0.0.0", int(port)


def main(options: CheckOptions, listen: str, interval: float, nfd_output: Optional[str], expires_in: float,
         warn: common.Warn = None) -> int:
    from preflight.commands import pipeline
    from preflight.integrations import serve

    host, port = parse_listen(listen)
    latest = serve.Latest()
    pipeline.prepare(options, warn)  # bad options, configuration or rule files: exit 2 now, not in the background

    def after(report) -> None:
        if nfd_output:
            from preflight.files.output import emit
            from preflight.render import nfd

            emit(nfd.render(report, expires_in=expires_in), nfd_output)

    try:
        server = serve.HttpServer(serve.listening_socket(host, port), latest)
    except OSError as exc:
        raise PreflightError("--listen %s: %s" % (listen, exc.strerror or exc), "choose another port or address")
    checker = serve.Checker(lambda: pipeline.check(options, warn), interval, latest, after)

    def stop(signum, frame) -> None:
        checker.now()  # out of its wait
        server.stop()

    def reload(signum, frame) -> None:
        say("preflight serve: SIGHUP: checking now, with the site configuration and rules read again")
        checker.now()

    for name in ("SIGTERM", "SIGINT"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), stop)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, reload)
    bound_host, bound_port = server.address
    say("preflight serve: listening on http://%s:%d (/healthz, /metrics, /report); checking every %.0f s"
        % (bound_host, bound_port, interval))
    checker.start()
    try:
        server.serve_forever()
    finally:
        checker.stopping.set()
        checker.now()
        server.sock.close()
    say("preflight serve: stopped")
    return ExitCode.OK
