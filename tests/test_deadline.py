"""Nothing hangs: a probe that does not answer is abandoned at the deadline and reported unknown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import NEUTRAL_CWD, clean_env, nvml_fixture, run_cli

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
        # gpu.expected_count: no count expected (skipped); xid.*: the kernel log's probe did not run here
        results = [r for r in evaluate(rules, snapshot) if r.id != "gpu.expected_count" and not r.id.startswith("xid.")]
        assert {r.status for r in results} == {"error"}
        assert all("deadline" in r.message for r in results)
    finally:
        release.set()


def test_a_hung_interpreter_ends_within_the_deadline(tmp_path):
    hang = tmp_path / "python"
    hang.write_text("#!/bin/sh\nsleep 60\n")
    hang.chmod(0o755)
    started = time.monotonic()
    completed = run_cli("check", "--python", str(hang), "--timeout", "1", "--format", "json",
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
    completed = run_cli("check", "--python", env.python, "--timeout", "1.5", "--select", "torch.arch",
                        "--format", "json", "--nvml-fixture", nvml_fixture("h200-driver580.json"),
                        env={"FAKE_TORCH_IMPORT_SLEEP": "60"})
    assert time.monotonic() - started < 9
    report = json.loads(completed.stdout)
    result = report["results"][0]
    # A slow torch is not a failure: the kernels are unconfirmed, which warns, and the job may start.
    assert result["status"] == "warn", result
    assert "could not confirm the kernels: 'import torch' took longer than" in result["message"]
    assert result["fix"]["title"].startswith("Let torch answer once")
    assert completed.returncode == 0 and report["ok"] is True


def test_a_slow_probe_says_what_it_waits_for_on_a_terminal(fake_env):
    import pty

    env = fake_env()
    env.add_torch()
    argv = [sys.executable, "-m", "preflight", "check", "--python", env.python, "--timeout", "3", "--select",
            "torch.arch", "--nvml-fixture", nvml_fixture("h200-driver580.json"), "--no-cache"]
    primary, secondary = pty.openpty()
    try:
        completed = subprocess.run(argv, stdout=subprocess.PIPE, stderr=secondary, timeout=60, cwd=NEUTRAL_CWD,
                                   env=clean_env({"FAKE_TORCH_IMPORT_SLEEP": "2"}))
        os.close(secondary)
        secondary = None
        said = b""
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the terminal is closed: everything was read
                break
            if not chunk:
                break
            said += chunk
    finally:
        os.close(primary)
        if secondary is not None:
            os.close(secondary)
    text = said.decode("utf-8", "replace")
    assert text.count("preflight: waiting for 'import torch' in %s" % env.python) == 1, text
    assert "--timeout" in text
    assert completed.returncode == 0
    # Not on a terminal: nothing extra on standard error.
    quiet = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=NEUTRAL_CWD,
                           env=clean_env({"FAKE_TORCH_IMPORT_SLEEP": "2"}))
    assert "waiting for" not in quiet.stderr


def test_timeout_must_be_positive():
    completed = run_cli("check", "--timeout", "0")
    assert completed.returncode == 2 and "--timeout must be more than 0" in completed.stderr


# --- no helper outlives preflight ---------------------------------------------------------------

def _hanging_python(tmp_path):
    """An interpreter that never answers; it writes its PID first, then waits (as a grandchild would, too)."""
    pidfile = tmp_path / "pid"
    hang = tmp_path / "python"
    hang.write_text("#!/bin/sh\necho $$ > %s\nexec sleep 300\n" % pidfile)
    hang.chmod(0o755)
    return hang, pidfile


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for init to reap it."""
    try:
        with open("/proc/%d/stat" % pid) as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(path, seconds=20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError("%s was not written" % path)


def _gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_an_interpreter_that_does_not_answer_is_killed_at_the_deadline(tmp_path):
    hang, pidfile = _hanging_python(tmp_path)
    completed = run_cli("check", "--select", "python", "--python", str(hang), "--timeout", "1")
    assert completed.returncode == 1
    assert _gone(_wait_for(pidfile)), "the --python helper outlived preflight"


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_to_preflight_kills_its_helpers(tmp_path, signum, code):
    hang, pidfile = _hanging_python(tmp_path)
    # A runner started in the background inherits an ignored SIGINT (and so would preflight): give it the default.
    running = subprocess.Popen([sys.executable, "-m", "preflight", "check", "--select", "python", "--python",
                                str(hang), "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=clean_env(), cwd=NEUTRAL_CWD,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        helper = _wait_for(pidfile)
        running.send_signal(signum)
        assert running.wait(20) == code
    finally:
        running.kill()
    assert _gone(helper), "the --python helper outlived preflight"


def test_exec_leaves_no_helper_to_the_command(tmp_path):
    hang, pidfile = _hanging_python(tmp_path)
    # One read of the helper's state: a helper that exits between two looks (kill -0, then its status file) must
    # not read as alive. Gone, or a zombie (dead, not yet reaped), is gone.
    script = 'state=$(sed -n "s/^State:[[:space:]]*//p" "/proc/$(cat %s 2>/dev/null)/status" 2>/dev/null); ' \
             'case "$state" in ""|Z*) echo HELPER-GONE;; *) echo HELPER-ALIVE;; esac' % pidfile
    completed = run_cli("exec", "--select", "python", "--python", str(hang), "--timeout", "1", "--warn-only",
                        "--", "sh", "-c", script)
    assert "HELPER-GONE" in completed.stdout, completed.stdout + completed.stderr


def test_a_flooding_interpreter_is_cut_off(tmp_path):
    flood = tmp_path / "python"
    flood.write_text("#!/bin/sh\nexec yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n")
    flood.chmod(0o755)
    started = time.monotonic()
    completed = run_cli("check", "--select", "python.packages", "--python", str(flood), "--timeout", "30",
                        "--format", "json")
    assert time.monotonic() - started < 20
    result = json.loads(completed.stdout)["results"][0]
    assert result["status"] == "error" and "printed more than 8 MiB" in result["message"], result
