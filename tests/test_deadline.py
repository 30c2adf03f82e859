"""Nothing hangs: a probe that does not answer is abandoned at the deadline and reported unknown."""

from __future__ import annotations

import json
import threading
import time

from conftest import nvml_fixture, run_cli
from preflight.facts import collect
from preflight.probes import nvml, nvml_replay


class HangingBinding(nvml_replay.ReplayBinding):
    """The H200 recording, except that nvmlInit never returns (as on a GPU in a bad state)."""

    def __init__(self, release: threading.Event) -> None:
        pynvml = nvml.import_pynvml()
        super().__init__(pynvml, nvml_replay.load_fixture(nvml_fixture("h200-driver580.json")))
        self._release = release

    def _call(self, name, args, kwargs):
        if name == "nvmlInit":
            self._release.wait(60)
        return super()._call(name, args, kwargs)


def test_a_hung_nvml_call_is_abandoned_at_the_deadline():
    release = threading.Event()
    try:
        started = time.monotonic()
        snapshot = collect.collect({"nvml", "host"}, collect.Options(timeout=1.0, nvml_binding=HangingBinding(release)))
        elapsed = time.monotonic() - started
        assert elapsed < 3, elapsed
        assert snapshot["nvml"] is None
        assert snapshot["probes"]["nvml"]["status"] == "timeout"
        assert "no answer within the 1.0 s deadline" in snapshot["probes"]["nvml"]["error"]
        assert snapshot["probes"]["host"]["status"] == "ok"  # the other probes still report
        assert collect.abandoned_probes()

        from preflight.engine import loader, selection
        from preflight.engine.evaluate import evaluate

        rules = selection.choose(loader.load(), "node", [], [])
        results = evaluate(rules, snapshot, "node")
        assert {r.status for r in results} == {"error"}
        assert all("deadline" in r.message for r in results)
    finally:
        release.set()


def test_a_hung_interpreter_ends_within_the_deadline(tmp_path):
    hang = tmp_path / "python"
    hang.write_text("#!/bin/sh\nsleep 60\n")
    hang.chmod(0o755)
    started = time.monotonic()
    completed = run_cli("check", "--python", str(hang), "--timeout", "2", "--format", "json",
                        "--nvml-fixture", nvml_fixture("h200-driver580.json"))
    elapsed = time.monotonic() - started
    assert elapsed < 8, elapsed
    assert completed.returncode == 1
    report = json.loads(completed.stdout)
    errors = {r["id"]: r for r in report["results"] if r["status"] == "error"}
    assert {"torch.cuda", "python.packages"} <= set(errors)
    assert "gave no answer within" in errors["python.packages"]["message"]
    # GPU rules, which do not need the Python environment, still ran.
    assert [r["status"] for r in report["results"] if r["id"] == "driver.version"] == ["pass"]


def test_a_hung_torch_import_ends_within_the_deadline(fake_env):
    env = fake_env()
    env.add_torch()
    started = time.monotonic()
    completed = run_cli("check", "--python", env.python, "--timeout", "3", "--select", "torch.arch",
                        "--format", "json", "--nvml-fixture", nvml_fixture("h200-driver580.json"),
                        env={"FAKE_TORCH_IMPORT_SLEEP": "60"})
    assert time.monotonic() - started < 9
    result = json.loads(completed.stdout)["results"][0]
    assert result["status"] == "error" and "import torch" in result["message"]


def test_timeout_must_be_positive():
    completed = run_cli("check", "--timeout", "0")
    assert completed.returncode == 2 and "--timeout must be more than 0" in completed.stderr
