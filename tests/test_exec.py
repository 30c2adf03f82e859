"""preflight exec, for real: the command replaces preflight, keeps its PID, gets its signals and sets the exit status."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import NEUTRAL_CWD, clean_env, nvml_fixture, run_cli

H200 = nvml_fixture("h200-driver580.json")
RTX3060 = nvml_fixture("rtx3060-12g-driver525.json")
PASSING = ("exec", "--profile", "node", "--nvml-fixture", H200, "-q", "--")
FAILING = ("exec", "--profile", "node", "--nvml-fixture", RTX3060, "-q", "--")


def start(*args, env=None):
    return subprocess.Popen([sys.executable, "-m", "preflight", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=clean_env(env), cwd=NEUTRAL_CWD)


def test_the_exit_status_comes_through():
    for code in (0, 3, 7, 42):
        assert run_cli(*PASSING, sys.executable, "-c", "import sys; sys.exit(%d)" % code).returncode == code


def test_same_pid_and_signals_reach_the_command():
    child = start(*PASSING, sys.executable, "-c",
                  "import os, signal, sys, time\n"
                  "signal.signal(signal.SIGTERM, lambda *a: sys.exit(43))\n"
                  "print(os.getpid(), flush=True)\n"
                  "time.sleep(60)\n")
    pid = int(child.stdout.readline())
    assert pid == child.pid  # execvp: the command is the process preflight was
    child.send_signal(signal.SIGTERM)
    assert child.wait(30) == 43


def test_arguments_survive_exactly_and_no_shell_is_involved():
    tricky = ["a b", '"quoted"', "it's", "$HOME", "*", "`id`", "semi;colon", "", "--", "-x"]
    completed = run_cli(*PASSING, sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))", *tricky)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == tricky


def test_failing_checks_stop_the_command(tmp_path):
    marker = tmp_path / "ran"
    completed = run_cli(*FAILING, "touch", str(marker))
    assert completed.returncode == 78 and not marker.exists()  # EX_CONFIG: not the script's own failure
    assert "FAIL   driver.version" in completed.stderr
    assert "not starting touch: the checks failed (exit 78)" in completed.stderr
    assert "(exit 1)" not in completed.stderr  # the check's own exit code is not exec's
    assert completed.stdout == ""  # the report goes to stderr, the command owns stdout


def test_the_gate_exit_code_and_the_termination_message(tmp_path):
    marker = tmp_path / "ran"
    log = tmp_path / "termination-log"
    log.write_text("")
    completed = run_cli(FAILING[0], "--fail-exit-code", "3", "--termination-log", str(log), *FAILING[1:],
                        "touch", str(marker))
    assert completed.returncode == 3 and not marker.exists()
    message = log.read_text()
    assert message.startswith("preflight: not starting touch: driver.version driver 525.60.13")
    assert message.count("\n") == 1  # one line, as Kubernetes shows it
    # A file named on the command line is created; the default is written only where Kubernetes mounted it.
    absent = tmp_path / "absent"
    assert run_cli(FAILING[0], "--termination-log", str(absent), *FAILING[1:], "true").returncode == 78
    assert absent.read_text().startswith("preflight: not starting true")
    # Passing checks leave the message alone; the command's own status comes through.
    log.write_text("")
    assert run_cli(PASSING[0], "--termination-log", str(log), *PASSING[1:], "sh", "-c", "exit 9").returncode == 9
    assert log.read_text() == ""
    bad = run_cli(FAILING[0], "--fail-exit-code", "0", *FAILING[1:], "true")
    assert bad.returncode == 2 and "--fail-exit-code" in bad.stderr


def test_warn_only_starts_the_command_anyway(tmp_path):
    marker = tmp_path / "ran"
    completed = run_cli("exec", "--warn-only", *FAILING[1:], "touch", str(marker))
    assert completed.returncode == 0 and marker.exists()
    assert "starting touch anyway (--warn-only)" in completed.stderr


def test_an_emergency_skip_is_logged(tmp_path):
    marker = tmp_path / "ran"
    completed = run_cli(*FAILING, "touch", str(marker), env={"PREFLIGHT_SKIP": "1"})
    assert completed.returncode == 0 and marker.exists()
    assert "PREFLIGHT_SKIP is set: checks skipped" in completed.stderr


def test_options_from_the_environment():
    # PREFLIGHT_ARGS adds options (the command line still wins); PREFLIGHT_PROFILE picks the profile.
    completed = run_cli("exec", "--nvml-fixture", RTX3060, "--", "true",
                        env={"PREFLIGHT_ARGS": "--profile node --ignore driver --format json"})
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stderr)
    assert report["profile"] == "node" and "driver.version" not in [r["id"] for r in report["results"]]
    completed = run_cli("exec", "--nvml-fixture", H200, "--format", "json", "--", "true",
                        env={"PREFLIGHT_PROFILE": "node"})
    assert json.loads(completed.stderr)["profile"] == "node"


@pytest.mark.parametrize("extra, problem", [
    ("--warn-only true", "PREFLIGHT_ARGS holds 'true', which is not an option"),
    ("--profile node -- /bin/true", "PREFLIGHT_ARGS holds '--', which is not an option"),
    ("--ignore 'host.shm", "PREFLIGHT_ARGS=\"--ignore 'host.shm\" cannot be split into words: No closing quotation"),
    ("--no-such-option", "PREFLIGHT_ARGS holds '--no-such-option', which is not an option of preflight exec"),
    ("--profile", "PREFLIGHT_ARGS: --profile needs a value"),
])
def test_preflight_args_may_hold_options_only(tmp_path, extra, problem):
    marker = tmp_path / "ran"
    completed = run_cli("exec", "--profile", "node", "--nvml-fixture", H200, "--", "sh", "-c", "touch %s" % marker,
                        env={"PREFLIGHT_ARGS": extra})
    assert completed.returncode == 2, completed.stderr
    assert problem in completed.stderr and "Traceback" not in completed.stderr
    assert not marker.exists()  # neither the stray word nor the training command ran
    # Option values that look like words are fine, and --opt=value too.
    completed = run_cli("exec", "--nvml-fixture", H200, "--", "sh", "-c", "touch %s" % marker,
                        env={"PREFLIGHT_ARGS": "--profile node --ignore=host --timeout 5 -q"})
    assert completed.returncode == 0 and marker.exists(), completed.stderr


def test_retry_until_a_late_gpu_appears(tmp_path):
    """The driver comes up while preflight waits: the checks pass on a later attempt and the command starts."""
    facts = tmp_path / "facts.json"
    down = run_cli("facts", "--nvml-fixture", nvml_fixture("driver-not-loaded.json")).stdout
    up = run_cli("facts", "--nvml-fixture", H200).stdout
    facts.write_text(down)
    timer = threading.Timer(2.0, lambda: facts.write_text(up))
    timer.start()
    try:
        started = time.monotonic()
        completed = run_cli("exec", "--profile", "node", "--facts", str(facts), "--retry-timeout", "20s",
                            "--sleep", "0.5s", "-q", "--", sys.executable, "-c", "print('training')")
    finally:
        timer.cancel()
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "training"
    assert "attempt 1: 1 check(s) failing (nvml.init)" in completed.stderr
    assert 1.5 < time.monotonic() - started < 20


def test_retry_gives_up_at_the_timeout():
    started = time.monotonic()
    completed = run_cli("exec", "--retry-timeout", "2s", "--sleep", "0.5s", *FAILING[1:], "true")
    elapsed = time.monotonic() - started
    assert completed.returncode == 78 and 1.5 < elapsed < 15
    assert completed.stderr.count("checking again in 0.5s") >= 2


def test_a_missing_command_and_bad_durations(tmp_path):
    completed = run_cli(*PASSING, "no-such-command-xyz")
    assert completed.returncode == 127 and "cannot start 'no-such-command-xyz': no such command" in completed.stderr
    # Found out before the checks, not after them: even failing checks do not run first.
    completed = run_cli(*FAILING, "no-such-command-xyz")
    assert completed.returncode == 127 and "FAIL" not in completed.stderr and "preflight: not starting" not in \
        completed.stderr, completed.stderr
    assert run_cli(*PASSING, "/nonexistent/train.sh").returncode == 127
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    completed = run_cli(*PASSING, str(script))
    assert completed.returncode == 126 and "not executable" in completed.stderr
    assert run_cli("exec", "--retry-timeout", "soon", *PASSING[1:], "true").returncode == 2
    assert run_cli("exec", "--profile", "node").returncode == 2  # no command


def test_preflight_args_apply_to_check_and_slurm_too(tmp_path):
    completed = run_cli("check", "--nvml-fixture", H200, env={"PREFLIGHT_ARGS": "--profile node --format json"})
    assert completed.returncode == 0 and json.loads(completed.stdout)["profile"] == "node"
    completed = run_cli("check", "--nvml-fixture", H200, env={"PREFLIGHT_ARGS": "--warn-only"})
    assert completed.returncode == 2
    assert "PREFLIGHT_ARGS holds '--warn-only', which is not an option of preflight check" in completed.stderr
    completed = run_cli("slurm", "--nvml-fixture", H200, "--scontrol", str(tmp_path / "none"),
                        env={"PREFLIGHT_ARGS": "node-17"})
    assert completed.returncode == 2 and "PREFLIGHT_ARGS holds 'node-17', which is not an option" in completed.stderr
    # Commands that evaluate no rules leave it alone.
    assert run_cli("rules", env={"PREFLIGHT_ARGS": "--warn-only"}).returncode == 0
