"""Nothing unbounded: every pass over a log is linear in its size, the kernel log is read under the deadline, text
wrapping is linear in a word's length. The red team's shapes, through the real CLI; no timing is asserted (a
subprocess timeout only guards against a hang), linearity is asserted on the bytes the scanner examines."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time

import pytest
from conftest import FIXTURES, NEUTRAL_CWD, clean_env, nvml_fixture, run_cli
from test_serve import Server

H200 = nvml_fixture("h200-driver580.json")
ANCHOR = "No labels found in "  # an anchor whose pattern needs more than it (", can not start training")


def _repeat(size: int, text: str = ANCHOR) -> str:
    return (text * (size // len(text) + 1))[:size]


def shapes(size: int):
    return {
        "one line": _repeat(size) + "\n",
        "64 KB lines": "\n".join([_repeat(65536)] * max(1, size // 65536)) + "\n",
        "short lines": (ANCHOR.strip() + "\n") * (size // len(ANCHOR)),
        "wrapped": "No labels\nfound in x\n" * (size // 20),
        "other case": "no LABELS found IN " * (size // len(ANCHOR)),
        "one letter": "A" * size + "\n",  # every byte can begin an anchor: one regex per first byte
        "one-byte anchor": "@" * size + "\n",  # an anchor at every byte of one line
        "base64": (("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo" * (size // 35 + 1))[:size]) + "\n",
    }


@pytest.fixture(scope="module")
def catalog():
    from preflight.engine import loader

    ruleset = loader.load(failures=True)
    return list(ruleset.failures.values()), list(ruleset.clues.values())


@pytest.mark.parametrize("shape", list(shapes(1024)))
def test_the_scanner_examines_a_bounded_multiple_of_the_log(catalog, shape):
    from preflight.diagnose.scan import scan

    failures, clues = catalog
    examined = {}
    for size in (1 << 18, 1 << 20):
        text = shapes(size)[shape].encode("utf-8")
        result = scan(io.BytesIO(text), failures, clues=clues)
        assert not result.hits  # the anchor alone is not the failure
        examined[size] = result.examined
        assert result.examined <= 8 * len(text) + 600000, (shape, size, result.examined)
    assert examined[1 << 20] <= 5 * examined[1 << 18] + 600000, examined  # not quadratic


@pytest.mark.parametrize("shape", list(shapes(1024)))
def test_diagnose_finishes_on_each_shape_at_one_megabyte(tmp_path, shape):
    log = tmp_path / "train.log"
    log.write_text(shapes(1 << 20)[shape] + "\nAssertionError: train: No labels found in /data/x.cache, can not "
                   "start training.\n")
    completed = subprocess.run([sys.executable, "-m", "preflight", "diagnose", str(log), "--no-facts", "--format",
                                "json"], capture_output=True, text=True, timeout=120, cwd=NEUTRAL_CWD,
                               env=clean_env())
    assert completed.returncode == 1, completed.stderr
    assert [m["id"] for m in json.loads(completed.stdout)["matches"]] == ["yolov9.no_labels"]


# --- the kernel log under the deadline --------------------------------------------------------------------

def test_a_kernel_log_fifo_without_a_writer_does_not_hang_the_check(tmp_path):
    fifo = tmp_path / "kmsg.fifo"
    os.mkfifo(str(fifo))
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--kernel-log", str(fifo),
                        "--timeout", "2", "--format", "json", subprocess_only=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    xid = [r for r in report["results"] if r["id"] == "xid.node"][0]
    assert xid["status"] == "skip" and "was not read" in xid["message"], xid


def test_a_slow_kernel_log_pipe_is_read_until_the_deadline_only(tmp_path):
    fifo = tmp_path / "slow.fifo"
    os.mkfifo(str(fifo))

    def slow_writer():
        with open(str(fifo), "w") as out:
            out.write("NVRM: Xid (PCI:0000:18:00): 79, pid=1, GPU has fallen off the bus.\n")
            out.flush()
            time.sleep(20)
    writer = threading.Thread(target=slow_writer, daemon=True)
    writer.start()
    started = time.monotonic()
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--kernel-log", str(fifo),
                        "--timeout", "2", "--format", "json", subprocess_only=True, timeout=60)
    assert time.monotonic() - started < 15  # not the writer's 20 s
    assert completed.returncode in (0, 1), completed.stderr
    assert json.loads(completed.stdout)["results"]


def test_serve_keeps_checking_with_a_kernel_log_fifo_that_never_answers(tmp_path):
    fifo = tmp_path / "kmsg.fifo"
    os.mkfifo(str(fifo))
    server = Server("--profile", "node", "--nvml-fixture", H200, "--kernel-log", str(fifo), "--timeout", "1",
                    "--interval", "1s")
    try:
        server.wait_for_check(deadline=30)
        status, body, _ = server.get("/healthz")
        assert status == 200, body
        _, metrics, _ = server.get("/metrics")
        checks = [line for line in metrics.splitlines() if line.startswith("preflight_checks_total ")]
        assert checks and int(checks[0].split()[1]) >= 1
    finally:
        server.stop()


# --- text wrapping ---------------------------------------------------------------------------------------

def test_a_two_million_character_gpu_name_is_cut_for_display(tmp_path):
    facts = json.loads((FIXTURES / "reference-facts.json").read_text())
    facts["nvml"]["gpus"][0]["name"] = "H" * 2000000
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    completed = subprocess.run([sys.executable, "-m", "preflight", "check", "--facts", str(path), "--profile", "node",
                                "--set", "gpu.memory.min=1TB"], capture_output=True, text=True, timeout=120,
                               cwd=NEUTRAL_CWD, env=clean_env({"COLUMNS": "100"}))
    assert completed.returncode == 1, completed.stderr
    assert "HHH... [1999000 more characters]" in " ".join(completed.stdout.split()) and len(completed.stdout) < 100000
    assert max(len(line) for line in completed.stdout.splitlines() if not line.lstrip().startswith("$")) <= 100


def test_the_wrap_of_one_huge_word_is_linear():
    from preflight.render.blocks import MAX_WORD, wrap

    lines = wrap("x" * 6000000, 80, "name: ", "  ")
    assert all(len(line) <= 80 for line in lines) and " ".join(lines).endswith("[5999000 more characters]")
    assert "".join(lines).count("x") == MAX_WORD
