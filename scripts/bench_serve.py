#!/usr/bin/env python3
"""Time `preflight serve` under load and abuse, over real sockets on loopback.

Two figures, from one server started from the recorded H200:

- the wall time of N concurrent GET /metrics (each its own connection, a thread per client);
- the latency of GET /healthz, probed every 0.5 s, while hostile clients are connected: half-sent requests,
  clients trickling one byte a second, and idle connections. Kubernetes' probes default to a 1 s timeout.

    python scripts/bench_serve.py [--scrapes 1000] [--half-sent 300] [--trickling 140] [--idle 100] [--seconds 15]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H200 = os.path.join(ROOT, "preflight", "recordings", "h200-driver580.json")


def request(address, path: str, timeout: float) -> bytes:
    with socket.create_connection(address, timeout=timeout) as connection:
        connection.sendall(b"GET %s HTTP/1.0\r\n\r\n" % path.encode())
        data = b""
        while True:
            chunk = connection.recv(65536)
            if not chunk:
                return data
            data += chunk


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scrapes", type=int, default=1000)
    parser.add_argument("--half-sent", type=int, default=300)
    parser.add_argument("--trickling", type=int, default=140)
    parser.add_argument("--idle", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, "-m", "preflight", "serve", "--listen", "127.0.0.1:0", "--profile",
                               "node", "--nvml-fixture", H200, "--interval", "1h"], stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()
        host, port = line.split("http://")[1].split()[0].rsplit(":", 1)
        address = (host, int(port))
        while b"OK" not in request(address, "/healthz", 5):
            time.sleep(0.1)
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=min(args.scrapes, 1000)) as pool:
            answers = list(pool.map(lambda _: request(address, "/metrics", 60), range(args.scrapes)))
        wall = time.perf_counter() - started
        good = sum(answer.startswith(b"HTTP/1.0 200") for answer in answers)
        print("%d concurrent /metrics: %d answered 200 in %.2f s" % (args.scrapes, good, wall))

        held = []
        for index in range(args.half_sent + args.trickling + args.idle):
            connection = socket.create_connection(address, timeout=10)
            if index < args.half_sent:
                connection.sendall(b"GET /metr")
            held.append(connection)
        stop = threading.Event()

        def trickle(connection) -> None:
            try:
                while not stop.is_set():
                    connection.sendall(b"X")
                    stop.wait(1.0)
            except OSError:
                pass  # cut off by the server: the point

        trickling = [threading.Thread(target=trickle, args=(connection,), daemon=True)
                     for connection in held[args.half_sent:args.half_sent + args.trickling]]
        for thread in trickling:
            thread.start()
        latencies, failures = [], 0
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            probe = time.perf_counter()
            try:
                ok = request(address, "/healthz", 1.0).startswith(b"HTTP/1.0 200")
            except OSError:
                ok = False
            latencies.append(time.perf_counter() - probe)
            failures += not ok
            time.sleep(0.5)
        stop.set()
        for connection in held:
            connection.close()
        print("/healthz with %d half-sent, %d trickling, %d idle clients: %d probes, %d not answered within 1 s, "
              "median %.1f ms, max %.1f ms" % (args.half_sent, args.trickling, args.idle, len(latencies), failures,
                                              1000 * statistics.median(latencies), 1000 * max(latencies)))
    finally:
        server.terminate()
        server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
