#!/usr/bin/env python3
"""Measure how fast `preflight diagnose` reads a large training log.

Generates a realistic YOLOv9 log (scripts/make_training_log.py) once, then
runs the whole command on it several times and reports MB/s, with the time of
reading the file alone (`cat > /dev/null` equivalent) for comparison:

    python scripts/bench_diagnose.py [--size-mb 1024] [--runs 3] [--log PATH] [--preflight CMD]

With ``--shapes``, what is not a training log instead, each --size-mb large and
timed through the whole command side by side: one huge line of one letter, of
``@``, of random letters and words, of base64; prose with a line break every
100 bytes; a UTF-16 log; random bytes (said to be no text); a text log with a
stretch of random bytes inside; and the training log itself.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--log", default=os.path.join(tempfile.gettempdir(), "preflight-bench-train.log"))
    parser.add_argument("--preflight", help="command that runs preflight (default: this python -m preflight)")
    parser.add_argument("--shapes", action="store_true", help="time the hostile shapes side by side")
    args = parser.parse_args()
    preflight = shlex.split(args.preflight) if args.preflight else [sys.executable, "-m", "preflight"]
    if args.shapes:
        return shapes(preflight, int(args.size_mb * 1e6), args.log)
    want = int(args.size_mb * 1e6)
    if not os.path.exists(args.log) or abs(os.path.getsize(args.log) - want) > want * 0.01:
        subprocess.run([sys.executable, os.path.join(HERE, "make_training_log.py"), args.log,
                        "--size-mb", str(args.size_mb)], check=True)
    size = os.path.getsize(args.log)

    def read_only() -> float:
        started = time.perf_counter()
        with open(args.log, "rb") as handle:
            while handle.read(4 << 20):
                pass
        return time.perf_counter() - started

    read_times, runs = [], []
    for _ in range(args.runs):
        read_times.append(read_only())
        started = time.perf_counter()
        completed = subprocess.run(preflight + ["diagnose", args.log, "--no-facts", "--format", "json"],
                                   capture_output=True, text=True)
        runs.append(time.perf_counter() - started)
        if completed.returncode not in (0, 1):
            print(completed.stderr, file=sys.stderr)
            return 1
    found = [(m["id"], m["line"]) for m in json.loads(completed.stdout)["matches"]]
    median = statistics.median(runs)
    print("log: %s, %.1f MB" % (args.log, size / 1e6))
    print("found: %s" % ", ".join("%s at line %d" % f for f in found))
    print("preflight diagnose: median %.2f s over %d runs = %.0f MB/s (min %.2f s, max %.2f s)"
          % (median, len(runs), size / median / 1e6, min(runs), max(runs)))
    print("reading the file alone: median %.2f s = %.0f MB/s" % (statistics.median(read_times),
                                                               size / statistics.median(read_times) / 1e6))
    return 0


def _shape_bytes(name: str, size: int, log: str) -> bytes:
    import base64
    import random

    rng = random.Random(7)
    words = [b"the", b"loss", b"Epoch", b"box", b"cls", b"dfl", b"GPU_mem", b"0.123", b"Instances", b"Size",
             b"warning", b"deprecated", b"module", b"function", b"checkpoint", b"dataset"]
    block = 1 << 20
    if name == "one letter, one line":
        return b"A" * size + b"\n"
    if name == "'@', one line":
        return b"@" * size + b"\n"
    if name == "random letters, one line":
        unit = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(block))
        return unit * (size // block) + b"\n"
    if name == "words, one line":
        unit = b" ".join(rng.choice(words) for _ in range(block // 5))[:block]
        return unit * (size // block) + b"\n"
    if name == "base64, one line":
        return base64.b64encode(os.urandom(size * 3 // 4)) + b"\n"
    if name == "prose, 100-byte lines":
        unit = b"".join(b" ".join(rng.choice(words) for _ in range(14))[:99] + b"\n" for _ in range(block // 100))
        return unit * (size // len(unit))
    if name == "random bytes":
        return os.urandom(size)
    with open(log, "rb") as handle:
        text = handle.read(size)
    if name == "UTF-16 training log":
        return text[:size // 2].decode("utf-8", "replace").encode("utf-16")
    if name == "log with 20% random bytes inside":
        cut = len(text) * 2 // 5
        return text[:cut] + os.urandom(len(text) // 5) + b"\n" + text[cut + len(text) // 5:]
    return text


SHAPES = ("training log", "prose, 100-byte lines", "one letter, one line", "'@', one line",
          "random letters, one line", "words, one line", "base64, one line", "UTF-16 training log",
          "log with 20% random bytes inside", "random bytes")


def shapes(preflight, size: int, log: str) -> int:
    if not os.path.exists(log) or os.path.getsize(log) < size:
        subprocess.run([sys.executable, os.path.join(HERE, "make_training_log.py"), log,
                        "--size-mb", str(size / 1e6)], check=True)
    print("%-34s %9s %8s %9s  %s" % ("shape", "MB", "seconds", "MB/s", "exit: what it said"))
    with tempfile.TemporaryDirectory() as folder:
        for name in SHAPES:
            path = os.path.join(folder, "shape.log")
            with open(path, "wb") as out:
                out.write(_shape_bytes(name, size, log))
            started = time.perf_counter()
            completed = subprocess.run(preflight + ["diagnose", path, "--no-facts"], capture_output=True,
                                       text=True)
            took = time.perf_counter() - started
            said = (completed.stdout or completed.stderr).strip().splitlines()
            megabytes = os.path.getsize(path) / 1e6
            print("%-34s %9.1f %8.2f %9.0f  %d: %s" % (name, megabytes, took, megabytes / took,
                                                      completed.returncode, (said[0] if said else "")[:70]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
