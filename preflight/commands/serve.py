"""preflight serve: check every interval and serve the latest result over HTTP (/healthz, /metrics, /report)."""

from __future__ import annotations

import signal
from typing import Optional

import click

from preflight.commands import common
from preflight.commands.click_options import (FIT, NODE_WATCH, PROBE, WORKLOAD, check_options, complete_files, declare,
                                              duration, warn)
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


# --- the command line ----------------------------------------------------------------------------------------

def build() -> click.Command:
    @click.command("serve")
    @declare(NODE_WATCH)
    @click.option("--listen", default="127.0.0.1:10480", show_default=True, metavar="HOST:PORT",
                  help="Where to serve /healthz, /metrics and /report (0.0.0.0:10480 for every interface; port 0: any).")
    @click.option("--interval", default="60s", show_default=True, metavar="DURATION",
                  help="How often to check (requests never start a check).")
    @click.option("--nfd-output", metavar="FILE", shell_complete=complete_files,
                  help="Also write the NFD feature file after every check (as check --format nfd --output FILE).")
    @click.option("--expires-in", default="1h", show_default=True, metavar="DURATION",
                  help="With --nfd-output: NFD drops the labels if the file is not rewritten within this time.")
    @check_options(PROBE, WORKLOAD, FIT)
    def serve(options, listen, interval, nfd_output, expires_in) -> int:
        """Check every interval and serve the latest result over HTTP: /healthz (200 OK, 503 failing) for
        Kubernetes probes, /metrics for Prometheus, /report as JSON. SIGTERM stops it."""
        seconds = duration("--interval", interval)
        if seconds < 1:
            raise click.UsageError("--interval must be at least 1s, got %s" % interval)
        return main(options, listen, seconds, nfd_output, duration("--expires-in", expires_in), warn)
    return serve
