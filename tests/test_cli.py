"""The command line as users and scripts meet it: replayed machines, output contracts, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (
    NEUTRAL_CWD,
    REPO,
    by_id,
    clean_env,
    nvml_fixture,
    run_cli,
    run_json,
)

# Expected results of the GPU rules for each recorded machine (node profile:
# hardware and driver only, so the local Python environment does not matter).
FIXTURE_EXPECTATIONS = {
    "h200-driver580.json": {
        "exit": 0,
        "results": {("nvml.init", "system"): "pass", ("gpu.count", "system"): "pass",
                    ("gpu.health", "gpu0"): "pass", ("driver.version", "system"): "pass",
                    ("gpu.compute_capability", "gpu0"): "pass", ("gpu.memory", "gpu0"): "pass",
                    ("gpu.throttle", "gpu0"): "pass"},
    },
    "2x-a100-40g-driver550-ecc.json": {
        "exit": 1,
        "results": {("gpu.count", "system"): "pass", ("gpu.health", "gpu0"): "pass", ("gpu.health", "gpu1"): "fail",
                    ("driver.version", "system"): "warn", ("gpu.compute_capability", "gpu0"): "pass",
                    ("gpu.compute_capability", "gpu1"): "pass", ("gpu.memory", "gpu1"): "pass"},
    },
    "rtx3060-12g-driver525.json": {
        "exit": 1,
        "results": {("gpu.count", "system"): "pass", ("gpu.health", "gpu0"): "pass",
                    ("driver.version", "system"): "fail", ("gpu.compute_capability", "gpu0"): "pass",
                    ("gpu.memory", "gpu0"): "warn"},
    },
    "no-library.json": {
        "exit": 1,
        "results": {("nvml.init", "system"): "fail", ("gpu.count", "system"): "skip",
                    ("driver.version", "system"): "skip", ("gpu.memory", "system"): "skip"},
    },
    "driver-not-loaded.json": {
        "exit": 1,
        "results": {("nvml.init", "system"): "fail", ("gpu.health", "system"): "skip"},
    },
    # Node health (tests/test_node_health.py checks them rule by rule).
    "8x-h100-hgx.json": {
        "exit": 0,
        "results": {("gpu.nvlink", "gpu7"): "pass", ("gpu.fabric", "gpu0"): "pass", ("gpu.pcie", "gpu3"): "pass",
                    ("xid.node", "system"): "skip"},
    },
    "8x-h100-hgx-faults.json": {
        "exit": 1,
        "results": {("gpu.pcie", "gpu2"): "fail", ("gpu.nvlink", "gpu3"): "fail", ("gpu.fabric", "gpu4"): "fail",
                    ("gpu.temperature", "gpu5"): "fail", ("gpu.power_limit", "gpu6"): "fail",
                    ("gpu.inforom", "gpu7"): "fail", ("gpu.nvlink", "gpu0"): "pass"},
    },
    "8x-h100-one-missing-one-lost.json": {
        "exit": 1,
        "results": {("gpu.health", "gpu5"): "fail", ("gpu.health", "gpu4"): "pass", ("gpu.nvlink", "gpu4"): "pass"},
    },
    "v100-retired-pages.json": {
        "exit": 1,
        "results": {("gpu.retired_pages", "gpu0"): "fail", ("gpu.compute_capability", "gpu0"): "fail"},
    },
}


def test_every_shared_fixture_has_expectations():
    names = {p.name for p in (REPO / "preflight" / "recordings").glob("*.json")}
    assert names == set(FIXTURE_EXPECTATIONS)


@pytest.mark.parametrize("name", sorted(FIXTURE_EXPECTATIONS))
def test_each_fixture_replays_with_the_right_results(name):
    expected = FIXTURE_EXPECTATIONS[name]
    completed = run_cli("check", "--profile", "node", "--format", "json", "--nvml-fixture", nvml_fixture(name))
    assert completed.returncode == expected["exit"], completed.stdout
    report = json.loads(completed.stdout)
    seen = {(r["id"], r["subject"]): r["status"] for r in report["results"]}
    for key, status in expected["results"].items():
        assert seen.get(key) == status, (key, seen.get(key))
    assert report["ok"] is (expected["exit"] == 0)


def test_json_contract():
    report = run_json("check", "--nvml-fixture", nvml_fixture("rtx3060-12g-driver525.json"))
    assert report["schema"] == "preflight.report/1"
    assert isinstance(report["ok"], bool) and report["profile"] == "train"
    assert set(report["summary"]) == {"pass", "fail", "warn", "skip", "error"}
    for result in report["results"]:
        assert {"id", "status", "severity", "subject", "observed", "expected", "message", "fix"} <= set(result)
        assert result["status"] in ("pass", "fail", "warn", "skip", "error")
        assert result["severity"] in ("error", "warning", "info")
        assert result["subject"] == "system" or result["subject"].startswith("gpu")
        if result["fix"] is not None:
            assert set(result["fix"]) == {"title", "steps", "commands"}
            assert all(isinstance(c, str) for c in result["fix"]["commands"])
        if result["status"] in ("fail", "warn"):
            assert result["fix"] is not None, result["id"]
    memory = by_id(report)["gpu.memory"][0]
    assert memory["observed"] == 12884901888 and memory["expected"] == ">= 12GB, recommended >= 16GB"


def test_exit_codes_follow_severity_and_strict(tmp_path):
    rtx = nvml_fixture("rtx3060-12g-driver525.json")
    # gpu.memory warns on a 12 GB card: exit 0 without --strict, 1 with it.
    assert run_cli("check", "--nvml-fixture", rtx, "--select", "gpu.memory").returncode == 0
    assert run_cli("check", "--nvml-fixture", rtx, "--select", "gpu.memory", "--strict").returncode == 1
    # An error-severity failure is exit 1; demoting it to a warning makes it pass.
    assert run_cli("check", "--nvml-fixture", rtx, "--select", "driver").returncode == 1
    assert run_cli("check", "--nvml-fixture", rtx, "--select", "driver", "--set",
                   "driver.version.severity=warning").returncode == 0
    assert run_cli("check", "--nvml-fixture", rtx, "--select", "driver", "--set",
                   "driver.version.severity=info", "--strict").returncode == 0


def test_text_report_marks_fixes_summary_and_quiet():
    rtx = nvml_fixture("rtx3060-12g-driver525.json")
    text = run_cli("check", "--profile", "node", "--nvml-fixture", rtx).stdout
    assert "FAIL   driver.version" in text
    assert "fix: Install a supported NVIDIA driver branch (580 or newer)" in text
    # The install commands follow this machine's OS (the host probe runs in the node profile for container.devices).
    assert ("$ sudo ubuntu-drivers install" in text and "$ sudo apt-get install -y nvidia-driver-580" in text) or \
        "$ sudo apt-get install -y cuda-drivers" in text, text
    assert "PASS   gpu.health" in text
    assert "WARN   gpu.memory" in text
    assert text.rstrip().endswith("FAILED (exit 1)")
    assert "\033[" not in text  # not a terminal: no colour
    quiet = run_cli("check", "--profile", "node", "--nvml-fixture", rtx, "-q").stdout
    assert "PASS" not in quiet and "FAIL   driver.version" in quiet and "WARN   gpu.memory" in quiet


def test_colour_only_when_asked_or_on_a_terminal_and_never_with_no_color():
    rtx = nvml_fixture("rtx3060-12g-driver525.json")
    assert "\033[" in run_cli("check", "--nvml-fixture", rtx, "--color", "always").stdout
    assert "\033[" not in run_cli("check", "--nvml-fixture", rtx, env={"NO_COLOR": "1"}).stdout
    # A real terminal: colour by default, none with NO_COLOR.
    import os
    import pty

    def on_terminal(extra_env):
        master, slave = pty.openpty()
        child = subprocess.Popen([sys.executable, "-m", "preflight", "check", "--nvml-fixture", rtx, "--profile", "node"],
                                 stdout=slave, stderr=subprocess.DEVNULL, env=clean_env(extra_env), cwd=NEUTRAL_CWD)
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        child.wait(30)
        os.close(master)
        return b"".join(chunks).decode()

    assert "\033[" in on_terminal({})
    assert "\033[" not in on_terminal({"NO_COLOR": "1"})


def test_facts_round_trip(tmp_path):
    fixture = nvml_fixture("2x-a100-40g-driver550-ecc.json")
    facts = run_cli("facts", "--nvml-fixture", fixture)
    assert facts.returncode == 0
    snapshot = json.loads(facts.stdout)
    assert snapshot["schema"] == "preflight.facts/1"
    assert set(snapshot["probes"]) >= {"nvml", "host", "python", "container"}
    path = tmp_path / "facts.json"
    path.write_text(facts.stdout)
    live = run_json("check", "--nvml-fixture", fixture, "--profile", "node")
    replayed = run_json("check", "--facts", str(path), "--profile", "node")
    strip = lambda report: [(r["id"], r["subject"], r["status"], r["message"]) for r in report["results"]]
    assert strip(live) == strip(replayed)
    assert replayed["facts_source"] == "file %s" % path
    # and from stdin
    piped = run_cli("check", "--facts", "-", "--profile", "node", "--format", "json", stdin=facts.stdout)
    assert strip(json.loads(piped.stdout)) == strip(live)


@pytest.mark.parametrize("content, problem", [
    ("{not json", "not valid JSON"),
    ("[]", "the top level must be a JSON object"),
    ('{"schema": "preflight.facts/0", "probes": {}}', "'schema' is 'preflight.facts/0'"),
    ('{"schema": "preflight.facts/1"}', "'probes' must be an object"),
    ('{"schema": "preflight.facts/1", "probes": {}, "nvml": {"init": {}, "gpus": [{"name": "x"}]}}',
     "nvml.init: 'status' is missing"),
    ('{"schema": "preflight.facts/1", "probes": {}, "nvml": {"init": {"status": "ok"}, "gpus": [{"name": "x"}]}}',
     "nvml.gpus[0]: 'index' is missing"),
    ('{"schema": "preflight.facts/1", "probes": {}, "host": []}', "host: expected an object, found a list"),
    ('{"schema": "preflight.facts/1", "probes": {}, "nvml": {"init": {"status": "ok"}, "device_count": NaN}}',
     "NaN is not a number JSON allows"),
    ('{"schema": "preflight.facts/1", "probes": {}, "host": {"memory": {"total": 1e400}}}',
     "host.memory.total: expected a whole number"),
    ('{"schema": "preflight.facts/1", "probes": {}, "host": {"memory": {"total": %d}}}' % 10 ** 400,
     "host.memory.total: the number 1000000000000000000000000000000000000... is too large"),
    ('{"schema": "preflight.facts/1", "probes": {}, "visibility": {"visible": null}}',
     "visibility.visible: expected a list, found null"),
    ('{"schema": "preflight.facts/1", "probes": {}, "python": {"packages": {"torch": {"version": 2}}}}',
     "python.packages.torch.version: expected a string, found the number 2"),
    ("DEEP", "nested too deeply"),  # 100,000 nested lists, made in the test (a short id keeps the environment small)
])
def test_corrupt_facts_files_exit_2(tmp_path, content, problem):
    if content == "DEEP":
        content = "[" * 100000 + "]" * 100000
    path = tmp_path / "facts.json"
    path.write_text(content)
    completed = run_cli("check", "--facts", str(path))
    assert completed.returncode == 2
    assert problem in completed.stderr and str(path) in completed.stderr
    assert "preflight facts > facts.json" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_facts_missing_file_and_partial_snapshot(tmp_path):
    completed = run_cli("check", "--facts", str(tmp_path / "nope.json"))
    assert completed.returncode == 2 and "no such file" in completed.stderr
    path = tmp_path / "partial.json"
    path.write_text('{"schema": "preflight.facts/1", "probes": {}}')
    report = json.loads(run_cli("check", "--facts", str(path), "--format", "json").stdout)
    nvml = by_id(report)["nvml.init"][0]
    assert nvml["status"] == "error" and "did not run for this snapshot" in nvml["message"]


def test_facts_cannot_be_combined_with_probing_options(tmp_path):
    path = tmp_path / "facts.json"
    path.write_text(run_cli("facts", "--nvml-fixture", nvml_fixture("h200-driver580.json")).stdout)
    completed = run_cli("check", "--facts", str(path), "--nvml-fixture", nvml_fixture("h200-driver580.json"))
    assert completed.returncode == 2 and "--facts evaluates a saved snapshot" in completed.stderr


def test_facts_list_names_every_fact():
    listed = run_cli("facts", "--list").stdout
    for fact in ("nvml.driver_version", "gpu.memory.total", "cuda.compat", "host.shm.total", "python.packages"):
        assert fact in listed


def test_rules_and_explain():
    listed = run_cli("rules").stdout
    for rule_id in ("nvml.init", "gpu.count", "gpu.health", "gpu.mig", "driver.version", "cuda.compat",
                    "gpu.compute_capability", "gpu.memory", "torch.cuda", "torch.arch", "python.conda_env",
                    "python.packages", "host.shm", "container.require"):
        assert rule_id in listed
    node = run_cli("rules", "--profile", "node").stdout
    assert "torch.cuda" not in node and "gpu.health" in node
    explained = run_cli("explain", "gpu.memory")
    assert explained.returncode == 0
    text = explained.stdout
    assert "gpu.memory: GPU has enough memory" in text
    assert "train: >= 12GB, recommended >= 16GB" in text and "inference: >= 8GB" in text
    assert "--batch-size -1" in text and "source:" in text and "why:" in text
    unknown = run_cli("explain", "gpu.memroy")
    assert unknown.returncode == 2 and "did you mean gpu.memory" in unknown.stderr


def test_usage_errors_exit_2():
    assert run_cli("check", "--profile", "training").returncode == 2
    assert run_cli("check", "--format", "xml").returncode == 2
    assert run_cli("frobnicate").returncode == 2
    bad_select = run_cli("check", "--select", "gpux")
    assert bad_select.returncode == 2 and "no rule id is or starts with 'gpux'" in bad_select.stderr


def test_empty_selections_and_idle_workloads_are_explained():
    empty = run_cli("check", "--profile", "node", "--select", "torch", "--nvml-fixture", nvml_fixture("h200-driver580.json"))
    assert empty.returncode == 2 and "no rule is left to check in profile node: select torch (--select)" \
        in empty.stderr
    idle = run_cli("check", "--profile", "node", "--workload", "yolov9-c", "--nvml-fixture",
                   nvml_fixture("h200-driver580.json"))
    assert "--workload has no effect" in idle.stderr


def test_help_and_version():
    help_text = run_cli("--help").stdout
    assert "Exit codes: 0 passed, 1 a check failed, 2 bad usage, input or output, 3 internal error," in help_text
    assert "4 (slurm) scontrol failed, 5 (slurm) unknown, 78 (exec) checks kept the command from" in help_text
    check_help = run_cli("check", "--help").stdout
    for option in ("--profile", "--format", "--strict", "--select", "--ignore", "--set", "--facts", "--python",
                   "--nvml-fixture", "--timeout", "--rules", "-q", "--config", "--expect-gpus"):
        assert option in check_help
    assert run_cli("--version").stdout.strip() == "preflight, version 0.1.0 (knowledge as of %s)" % \
        (Path(__file__).parent.parent / "rules" / "knowledge" / "as-of.txt").read_text().strip()


def test_console_script_and_python_dash_m_agree():
    from pathlib import Path

    script = Path(sys.executable).parent / "preflight"
    if not script.exists():
        pytest.skip("preflight is not installed into this interpreter's environment")
    via_script = subprocess.run([str(script), "rules", "--format", "json"], capture_output=True, text=True,
                                env=clean_env(), cwd="/")
    assert via_script.returncode == 0, via_script.stderr
    assert json.loads(via_script.stdout) == json.loads(run_cli("rules", "--format", "json").stdout) or \
        [r["id"] for r in json.loads(via_script.stdout)] == [r["id"] for r in json.loads(run_cli("rules", "--format", "json").stdout)]


def test_the_check_imports_no_torch_and_rules_loads_no_nvml(fake_env, tmp_path):
    """Run in-process with a torch on sys.path: find_spec and version.py only, never import."""
    env = fake_env()
    env.add_torch(import_log=tmp_path / "log")
    code = (
        "import sys\n"
        "from preflight.commands import options, pipeline\n"
        "report = pipeline.check(options.CheckOptions(nvml_fixture=%r, use_cache=False))\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "print(sorted(r.status for r in report.results if r.id == 'torch.cuda'))\n"
    ) % nvml_fixture("h200-driver580.json")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               env=clean_env({"PYTHONPATH": str(env.site)}), cwd=NEUTRAL_CWD)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "['pass']"
    # torch was imported only by the architecture helper process, never by preflight's own.
    assert len((tmp_path / "log").read_text().split()) == 1

    code = ("import sys, atexit\n"
            "atexit.register(lambda: print(sorted(m for m in ('pynvml', 'psutil', 'torch') if m in sys.modules)))\n"
            "from preflight.cli import main\nmain(['rules'])\n")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), cwd=NEUTRAL_CWD)
    assert completed.stdout.strip().splitlines()[-1] == "[]"


def test_internal_errors_are_reported_without_a_traceback(tmp_path):
    code = ("import preflight.commands.pipeline as c\n"
            "def boom(*a, **k): raise RuntimeError('simulated bug')\n"
            "c.check = boom\n"
            "from preflight.cli import main\nmain(['check'])\n")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), cwd=NEUTRAL_CWD)
    assert completed.returncode == 3
    assert "internal error: RuntimeError: simulated bug" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_a_shipped_recording_is_named_by_its_file_name_its_name_or_a_unique_part():
    for name in ("h200-driver580.json", "h200-driver580", "h200"):
        completed = run_cli("check", "--profile", "node", "--select", "gpu.count", "--format", "json",
                            "--nvml-fixture", name)
        assert completed.returncode == 0, (name, completed.stderr)
        assert json.loads(completed.stdout)["inventory"]["gpus"][0]["name"] == "NVIDIA H200", name
    ambiguous = run_cli("check", "--nvml-fixture", "h100")
    assert ambiguous.returncode == 2 and "more than one shipped recording is named like it" in ambiguous.stderr
    missing = run_cli("check", "--nvml-fixture", "nope.json")
    assert missing.returncode == 2 and "NVML fixture nope.json: no such file" in missing.stderr, missing.stderr
