"""Report formats for the places preflight plugs into, and atomic --output."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from xml.etree import ElementTree

import pytest
from conftest import NEUTRAL_CWD, clean_env, nvml_fixture, run_cli

from preflight.errors import PreflightError
from preflight.files import output

H200 = nvml_fixture("h200-driver580.json")
A100X2 = nvml_fixture("2x-a100-40g-driver550-ecc.json")
RTX3060 = nvml_fixture("rtx3060-12g-driver525.json")
NO_LIBRARY = nvml_fixture("no-library.json")


def node(fmt, fixture, *args, env=None, subprocess_only=False):
    return run_cli("check", "--profile", "node", "--format", fmt, "--nvml-fixture", fixture, *args, env=env,
                   subprocess_only=subprocess_only)


# --- JUnit ----------------------------------------------------------------------------

def test_junit_one_case_per_rule_and_subject_failures_carry_message_and_fix():
    completed = node("junit", A100X2)
    assert completed.returncode == 1
    suites = ElementTree.fromstring(completed.stdout)
    suite = suites.find("testsuite")
    cases = suite.findall("testcase")
    assert {c.get("name") for c in cases} >= {"gpu.health [gpu0]", "gpu.health [gpu1]", "driver.version [system]"}
    assert suite.get("tests") == str(len(cases)) and suite.get("failures") == "1"
    failure = [c for c in cases if c.get("name") == "gpu.health [gpu1]"][0].find("failure")
    assert "2 uncorrected ECC" in failure.get("message")
    assert "fix: Take this GPU out of service and reset it" in failure.text
    assert "$ sudo nvidia-smi --gpu-reset -i 1" in failure.text


def test_junit_warnings_pass_unless_strict_and_skips_are_skipped():
    lenient = ElementTree.fromstring(node("junit", RTX3060, "--select", "gpu.memory").stdout)
    case = lenient.find("testsuite/testcase")
    assert case.find("failure") is None and "WARN" in case.find("system-out").text
    strict = ElementTree.fromstring(node("junit", RTX3060, "--select", "gpu.memory", "--strict").stdout)
    assert strict.find("testsuite/testcase/failure") is not None
    skipped = ElementTree.fromstring(node("junit", NO_LIBRARY).stdout)
    # 7 GPU rules, 8 node-health, 2 Xid and 2 container device-node rules (no NVML: nothing to look for)
    assert skipped.find("testsuite").get("skipped") == "19"


# --- Prometheus ---------------------------------------------------------------------------

_SAMPLE = re.compile(r'^[a-z_]+\{([a-z_]+="(?:[^"\\]|\\.)*",?)*\} [0-9.e+-]+$')


def test_prometheus_textfile_metrics():
    completed = node("prometheus", A100X2)
    assert completed.returncode == 1
    lines = completed.stdout.splitlines()
    samples = [line for line in lines if not line.startswith("#")]
    assert all(_SAMPLE.match(line) for line in samples), [l for l in samples if not _SAMPLE.match(l)]
    names = {line.split("{")[0] for line in samples}
    assert names == {"preflight_ok", "preflight_rule_status", "preflight_check_duration_seconds",
                     "preflight_last_run_timestamp_seconds", "preflight_build_info", "preflight_gpu_info",
                     "preflight_gpu_memory_total_bytes", "preflight_coverage"}
    for name in names:
        assert "# TYPE %s gauge" % name in lines
    assert any(line.startswith('preflight_ok{profile="node",hostname="') and line.endswith("} 0") for line in lines)
    # Every series names its node, so tables and alerts count nodes by hostname (instance is a pod's address).
    assert all('hostname="' in line for line in samples), samples
    # gpu is the index as dcgm-exporter labels it; hostname the node's (its Hostname), for joins with DCGM metrics.
    failing = [l for l in lines if l.startswith('preflight_rule_status{rule="gpu.health",subject="gpu1",'
                                                'severity="error",gpu="1",hostname="')]
    assert len(failing) == 5 and [l for l in failing if l.endswith('status="fail"} 1')], failing
    assert [l for l in lines if l.startswith('preflight_gpu_memory_total_bytes{gpu="1",uuid="GPU-')
            and l.endswith("} 42949672960")]
    assert any(line.startswith('preflight_coverage{check="xid",hostname="') and line.endswith("} 0")
               for line in lines)  # a replayed machine's kernel log is not read: said
    assert any(l.startswith('preflight_gpu_info{gpu="0",name="NVIDIA A100-SXM4-40GB"') for l in lines)
    # every rule and subject has exactly one current status
    current = [l for l in lines if l.startswith("preflight_rule_status") and l.endswith(" 1")]
    assert len(current) * 5 == len([l for l in lines if l.startswith("preflight_rule_status")])


def test_prometheus_label_values_are_escaped():
    from preflight.render.prometheus import _series

    assert _series("m", {"a": 'x"y\\z\nw'}, 1) == 'm{a="x\\"y\\\\z\\nw"} 1'


# --- Node Feature Discovery -------------------------------------------------------------------

_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def test_nfd_feature_file():
    completed = node("nfd", H200)
    assert completed.returncode == 0
    lines = completed.stdout.splitlines()
    assert lines[0].startswith("# preflight") and lines[1].startswith("# +expiry-time=")
    labels = dict(line.split("=", 1) for line in lines if not line.startswith("#"))
    for name, value in labels.items():
        assert _LABEL_NAME.match(name) and _LABEL_VALUE.match(value), (name, value)
    assert labels["preflight.ready"] == "true"
    assert labels["preflight.status.gpu.health"] == "pass"
    assert labels["preflight.cuda.driver-version.major"] == "580"
    assert labels["preflight.gpu.compute.major"] == "9" and labels["preflight.gpu.compute.minor"] == "0"
    assert labels["preflight.gpu.memory"] == "143771" and labels["preflight.gpu.product"] == "NVIDIA-H200"
    assert len(completed.stdout.encode()) < 64 * 1024


def test_nfd_and_prometheus_count_the_same_gpus():
    """One accessor decides which GPUs count (inventory.visible_gpus): those CUDA sees here that NVML can read."""
    lost = nvml_fixture("8x-h100-one-missing-one-lost.json")
    for env, expected in (({}, 6), ({"CUDA_VISIBLE_DEVICES": "0,1"}, 2)):
        labels = dict(line.split("=", 1) for line in node("nfd", lost, env=env).stdout.splitlines()
                      if not line.startswith("#"))
        series = [line for line in node("prometheus", lost, env=env).stdout.splitlines()
                  if line.startswith("preflight_gpu_info{")]
        assert int(labels["preflight.gpu.count"]) == len(series) == expected, env


def test_nfd_worst_status_over_gpus_and_not_ready():
    labels = dict(l.split("=", 1) for l in node("nfd", A100X2).stdout.splitlines() if not l.startswith("#"))
    assert labels["preflight.ready"] == "false" and labels["preflight.status.gpu.health"] == "fail"
    none = dict(l.split("=", 1) for l in node("nfd", NO_LIBRARY).stdout.splitlines() if not l.startswith("#"))
    assert none["preflight.gpu.present"] == "false" and none["preflight.status.nvml.init"] == "fail"
    never = node("nfd", H200, "--expires-in", "0").stdout
    assert "+expiry-time" not in never
    assert node("nfd", H200, "--expires-in", "soon").returncode == 2


# --- node-problem-detector -----------------------------------------------------------------

@pytest.mark.parametrize("fixture, args, code, start", [
    (H200, (), 0, "preflight: OK, "),
    (A100X2, (), 1, "preflight: FAIL gpu1 gpu.health: "),
    (RTX3060, (), 1, "preflight: FAIL driver.version: "),
])
def test_npd_plugin_protocol(fixture, args, code, start):
    completed = node("npd", fixture, *args)
    assert completed.returncode == code
    lines = completed.stdout.splitlines()
    assert len(lines) == 1 and len(lines[0]) <= 80 and lines[0].startswith(start), lines


def test_npd_unknown_when_nothing_failed_but_something_is_unknown(tmp_path):
    hang = tmp_path / "python"
    hang.write_text("#!/bin/sh\nsleep 30\n")
    hang.chmod(0o755)
    completed = run_cli("check", "--format", "npd", "--nvml-fixture", H200, "--select", "python.packages",
                        "--python", str(hang), "--timeout", "1")
    assert completed.returncode == 2 and completed.stdout.startswith("preflight: UNKNOWN python.packages")


# --- --output ------------------------------------------------------------------------------------

def test_output_writes_every_format_atomically(tmp_path):
    for fmt in ("text", "json", "junit", "prometheus", "nfd", "npd"):
        target = tmp_path / ("report." + fmt)
        target.write_text("old\n")
        completed = node(fmt, H200, "--output", str(target))
        assert completed.returncode == 0 and completed.stdout == ""
        assert target.read_text() != "old\n" and target.read_text().endswith("\n")
        assert oct(target.stat().st_mode & 0o777) == "0o644"
    assert sorted(os.listdir(str(tmp_path))) == sorted("report." + f for f in
                                                      ("text", "json", "junit", "prometheus", "nfd", "npd"))


def test_output_for_facts_diagnose_and_plan(tmp_path):
    facts = tmp_path / "facts.json"
    assert run_cli("facts", "--nvml-fixture", H200, "--output", str(facts)).stdout == ""
    assert '"schema": "preflight.facts/1"' in facts.read_text()
    diagnosis = tmp_path / "diagnosis.json"
    completed = run_cli("diagnose", "-", "--no-facts", "--format", "json", "--output", str(diagnosis),
                        stdin="RuntimeError: No CUDA GPUs are available\n")
    assert completed.returncode == 1 and completed.stdout == "" and "cuda.no_gpu_visible" in diagnosis.read_text()
    plan = tmp_path / "plan.md"
    assert run_cli("plan", "--workload", "yolov9-s", "--format", "markdown", "--output", str(plan),
                   "--nvml-fixture", H200).returncode == 0
    assert plan.read_text().startswith("**yolov9-s train")


def test_a_failed_write_leaves_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "preflight.prom"
    target.write_text("previous metrics\n")

    def crash(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", crash)  # the process dies half-way: after writing, before the rename
    with pytest.raises(PreflightError, match="No space left on device; the old file is unchanged"):
        output.write_atomically(str(target), "new metrics\n" * 1000)
    assert target.read_text() == "previous metrics\n"
    assert os.listdir(str(tmp_path)) == ["preflight.prom"]  # no temporary file left behind


def test_output_to_a_missing_or_unwritable_folder(tmp_path):
    completed = node("prometheus", H200, "--output", str(tmp_path / "nope" / "preflight.prom"))
    assert completed.returncode == 2 and "does not exist; nothing was written" in completed.stderr
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "preflight.prom").write_text("old\n")
    locked.chmod(0o500)
    try:
        if os.access(str(locked), os.W_OK):
            pytest.skip("running as root: permissions do not stop writes")
        completed = node("prometheus", H200, "--output", str(locked / "preflight.prom"))
        assert completed.returncode == 2 and "the old file is unchanged" in completed.stderr
        assert (locked / "preflight.prom").read_text() == "old\n"
    finally:
        locked.chmod(0o700)


# --- --output never destroys what is at the path ------------------------------------------------

def _private_device(tmp_path, name, minor):
    """A character device node of our own (1,3 is the null device, 1,7 the full device), never the system's."""
    import stat as stat_module

    path = tmp_path / name
    try:
        os.mknod(str(path), 0o666 | stat_module.S_IFCHR, os.makedev(1, minor))
    except PermissionError:
        pytest.skip("mknod needs root (CI runs as root)")
    return path


def test_output_to_a_device_writes_into_it_and_keeps_it_a_device(tmp_path):
    import stat as stat_module

    null = _private_device(tmp_path, "null", 3)
    completed = node("json", H200, "--output", str(null))
    assert completed.returncode == 0, completed.stderr
    assert stat_module.S_ISCHR(null.stat().st_mode)
    full = _private_device(tmp_path, "full", 7)
    completed = node("json", H200, "--output", str(full))  # the write fails, not the check: its own exit code
    assert completed.returncode == 0 and "cannot write the report: No space left on device" in completed.stderr
    assert "the check's own verdict stands (exit 0)" in completed.stderr
    assert stat_module.S_ISCHR(full.stat().st_mode)
    assert sorted(os.listdir(str(tmp_path))) == ["full", "null"]  # no temporary files either


def test_output_dash_and_dev_stdout_reach_standard_output(tmp_path):
    for target in ("-", "/dev/stdout"):
        completed = node("json", H200, "--output", target, subprocess_only=True)  # file descriptor 1 itself
        assert completed.returncode == 0 and '"schema": "preflight.report/1"' in completed.stdout, target
    assert not os.path.exists(os.path.join(os.path.dirname(__file__), "-"))


def test_output_to_a_fifo_writes_in_place(tmp_path):
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(str(fifo))
    received = []
    reader = threading.Thread(target=lambda: received.append(open(str(fifo)).read()))
    reader.start()
    completed = node("prometheus", H200, "--output", str(fifo))
    reader.join(30)
    assert completed.returncode == 0 and "preflight_ok{" in received[0]
    assert os.path.exists(str(fifo)) and not os.path.isfile(str(fifo))


def test_output_follows_a_symlink_and_replaces_its_target(tmp_path):
    real = tmp_path / "collector"
    real.mkdir()
    target = real / "preflight.prom"
    target.write_text("old\n")
    link = tmp_path / "preflight.prom"
    link.symlink_to(target)
    completed = node("prometheus", H200, "--output", str(link))
    assert completed.returncode == 0
    assert link.is_symlink() and os.readlink(str(link)) == str(target)
    assert "preflight_ok{" in target.read_text()
    assert os.listdir(str(real)) == ["preflight.prom"]
    dangling = tmp_path / "new.prom"
    dangling.symlink_to(real / "created.prom")
    assert node("prometheus", H200, "--output", str(dangling)).returncode == 0
    assert dangling.is_symlink() and "preflight_ok{" in (real / "created.prom").read_text()


def test_output_to_a_folder_is_refused(tmp_path):
    completed = node("json", H200, "--output", str(tmp_path))
    assert completed.returncode == 2 and "is a folder" in completed.stderr


def test_stale_temporary_files_of_killed_writers_are_removed(tmp_path):
    target = tmp_path / "preflight.prom"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / (".preflight.prom.preflight-%d-abc123.tmp" % dead.pid)
    stale.write_text("half")
    other = tmp_path / (".unrelated.preflight-%d-abc123.tmp" % dead.pid)
    other.write_text("not ours to judge")
    live = tmp_path / (".preflight.prom.preflight-%d-xyz.tmp" % os.getppid())
    live.write_text("a live writer's")
    assert node("prometheus", H200, "--output", str(target)).returncode == 0
    assert sorted(os.listdir(str(tmp_path))) == sorted([target.name, other.name, live.name])


def test_standard_output_full_or_closed_is_said_and_keeps_the_checks_exit_code():
    for fmt in ("text", "json"):
        with open("/dev/full", "w") as full:
            completed = subprocess.run([sys.executable, "-m", "preflight", "check", "--profile", "node", "--format",
                                        fmt, "--nvml-fixture", H200], stdout=full, stderr=subprocess.PIPE, text=True,
                                       env=clean_env(), cwd=NEUTRAL_CWD)
        assert completed.returncode == 0, completed.stderr
        assert "cannot write the report to standard output: No space left on device" in completed.stderr
        assert "the check's own verdict stands (exit 0)" in completed.stderr
        assert "Traceback" not in completed.stderr
        closed = subprocess.run("exec >&-; exec %s -m preflight check --profile node --format %s --nvml-fixture %s"
                                % (sys.executable, fmt, H200), shell=True, stderr=subprocess.PIPE, text=True,
                                env=clean_env(), cwd=NEUTRAL_CWD)
        assert closed.returncode == 0 and "standard output is closed" in closed.stderr, closed.stderr


# --- the Nagios plugin convention (Icinga, Naemon, Zabbix's agent) ------------------------------------------------

def _nagios(*args):
    completed = run_cli("check", "--format", "nagios", *args)
    first, *rest = completed.stdout.splitlines()
    status, _, performance = first.partition(" | ")
    values = dict(item.split("=", 1) for item in performance.split())
    return completed.returncode, status, values, rest


def test_nagios_ok_warning_critical_and_unknown_each_with_its_exit_code(tmp_path):
    code, status, values, rest = _nagios("--profile", "node", "--nvml-fixture", nvml_fixture("h200-driver580.json"))
    assert code == 0 and status.startswith("PREFLIGHT OK - 17 passed (node profile)") and rest == []
    assert values["passed"] == "17;;;0" and values["failed"] == "0;;;0" and values["time"].endswith("s;;;0")
    a100 = nvml_fixture("2x-a100-40g-driver550-ecc.json")
    code, status, values, rest = _nagios("--nvml-fixture", a100, "--select", "driver.version")
    assert code == 1 and status.startswith("PREFLIGHT WARNING - driver.version driver 550.54.15")
    assert rest == ["WARN driver.version: driver 550.54.15, expected >= 530, recommended >= 580"]
    code, status, values, rest = _nagios("--profile", "node", "--nvml-fixture", a100)
    assert code == 2 and status.startswith("PREFLIGHT CRITICAL - gpu.health gpu1 NVIDIA A100-SXM4-40GB: 2 uncorrected")
    assert rest[0].startswith("FAIL gpu.health gpu1:") and values["failed"] == "1;;;0"
    hung = tmp_path / "python"
    hung.write_text("#!/bin/sh\nexec sleep 30\n")
    hung.chmod(0o755)
    code, status, values, rest = _nagios("--nvml-fixture", a100, "--select", "torch.cuda", "--python", str(hung),
                                         "--timeout", "2")
    assert code == 3 and status.startswith("PREFLIGHT UNKNOWN - torch.cuda") and values["unknown"] == "1;;;0"
    # A check that cannot run at all is UNKNOWN too (a monitoring system reads 2 as CRITICAL), on standard output.
    completed = run_cli("check", "--format", "nagios", "--select", "nope")
    assert completed.returncode == 3 and completed.stdout.startswith(
        "PREFLIGHT UNKNOWN - preflight could not run: --select nope: no rule id") and "\n" == completed.stdout[-1]
    assert " | " not in completed.stdout  # no performance data from a check that did not run


def test_nagios_says_unknown_on_every_path_that_did_not_produce_its_line(tmp_path):
    """Output that could not be written, options through PREFLIGHT_ARGS, a bad option: a status line where one
    can be written, and exit 3, never the check's verdict without its line nor click's exit 2."""
    h200 = nvml_fixture("h200-driver580.json")
    full = run_cli("check", "--profile", "node", "--nvml-fixture", h200, "--format", "nagios", "--output", "/dev/full",
                   subprocess_only=True)
    assert full.returncode == 3 and full.stdout == (
        "PREFLIGHT UNKNOWN - preflight could not run: --output /dev/full: cannot write the report: No space left "
        "on device\n"), (full.stdout, full.stderr)
    for stdout in (subprocess.DEVNULL, None):  # /dev/full as standard output; standard output closed
        argv = [sys.executable, "-m", "preflight", "check", "--profile", "node", "--nvml-fixture", h200, "--format",
                "nagios"]
        if stdout is None:
            completed = subprocess.run(["sh", "-c", '"$@" >&-', "sh"] + argv, stderr=subprocess.PIPE, text=True,
                                       env=clean_env(None), cwd=NEUTRAL_CWD, timeout=60)
        else:
            with open("/dev/full", "w") as sink:
                completed = subprocess.run(argv, stdout=sink, stderr=subprocess.PIPE, text=True,
                                           env=clean_env(None), cwd=NEUTRAL_CWD, timeout=60)
        assert completed.returncode == 3 and "Traceback" not in completed.stderr, completed.stderr
    for env, args in (({"PREFLIGHT_ARGS": "--format nagios"}, ("--bogus",)),
                      ({"PREFLIGHT_ARGS": "--format nagios --bogus"}, ()),
                      ({"PREFLIGHT_ARGS": "--format=nagios"}, ("--timeout", "soon"))):
        completed = run_cli("check", "--nvml-fixture", h200, *args, env=env)
        assert completed.returncode == 3 and completed.stdout.startswith(
            "PREFLIGHT UNKNOWN - preflight could not run: ") and completed.stdout.count("\n") == 1, \
            (env, args, completed.stdout, completed.stderr)
    # The command line wins over PREFLIGHT_ARGS, as for every option: not a plugin here, so click's exit 2.
    completed = run_cli("check", "--nvml-fixture", h200, "--format", "json", "--bogus",
                        env={"PREFLIGHT_ARGS": "--format nagios"})
    assert completed.returncode == 2 and completed.stdout == ""
