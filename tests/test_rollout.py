"""A site rolling preflight out: whole configuration files validated, reports kept, quiet gates, the prolog mode."""

from __future__ import annotations

import json
import os
import socket

import pytest
from conftest import nvml_fixture, run_cli
from test_slurm import calls, fake_scontrol

H200 = nvml_fixture("h200-driver580.json")
A100X2 = nvml_fixture("2x-a100-40g-driver550-ecc.json")
MISSING_AND_LOST = nvml_fixture("8x-h100-one-missing-one-lost.json")
HOST = socket.gethostname().split(".")[0]

GOOD = """[defaults]
profile = "node"
set = ["driver.version.min=550"]

[[match]]
hosts = ["gpu-a*"]
expect_gpus = 8
set = ["gpu.memory.min=80GB"]
"""

# README's example with typos, each in a section that does not match this host.
TYPOS = """[defaults]
profile = "node"

[[match]]
hosts = ["gpu-a*"]
set = ["gpu.memroy.min=80GB"]

[[match]]
hosts = ["gpu-b*"]
select = ["gpuu"]
ignore = ["driver.version"]
set = ["driver.version.min=banana"]
"""


def write(tmp_path, text, name="site.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# --- config validate and check: every section, matching or not --------------------------------------------------

def test_config_validate_names_every_problem_of_every_section_with_its_line(tmp_path):
    bad, good = write(tmp_path, TYPOS), write(tmp_path, GOOD, "good.toml")
    completed = run_cli("config", "validate", good, bad)
    assert completed.returncode == 2
    lines = completed.stdout
    assert "%s: ok ([defaults] and 1 [[match]] section)" % good in lines
    assert "%s:6: [[match]] 1: set: gpu.memroy.min=80GB: unknown rule id 'gpu.memroy'" % bad in lines
    assert "did you mean gpu.memory" in lines
    assert "%s:10: [[match]] 2: select: gpuu: no rule id is or starts with 'gpuu'" % bad in lines
    assert "%s:12: [[match]] 2: set: driver.version.min=banana:" % bad in lines and "'banana'" in lines
    assert "1 of 2 configuration files invalid" in lines
    assert run_cli("config", "validate", good).returncode == 0


def test_check_refuses_a_typo_in_a_section_for_other_hosts(tmp_path):
    bad = write(tmp_path, TYPOS)
    completed = run_cli("check", "--config", bad, "--nvml-fixture", H200)
    assert completed.returncode == 2
    assert "3 problems:" in completed.stderr and "%s:6: [[match]] 1" % bad in completed.stderr
    shown = run_cli("config", "show", "--config", bad)
    assert shown.returncode == 2 and "%s:10: [[match]] 2: select" % bad in shown.stderr


def test_structural_problems_of_several_sections_are_all_named(tmp_path):
    bad = write(tmp_path, '[defaults]\nprofle = "node"\n\n[[match]]\nhosts = []\n\n[[match]]\nhosts = "x"\n'
                          'rules = ["nowhere.toml"]\n')
    completed = run_cli("config", "validate", bad)
    assert completed.returncode == 2
    for where in (":2: [defaults]: profle", ":5: [[match]] 1: hosts", ":9: [[match]] 2: rules"):
        assert bad + where in completed.stdout, completed.stdout


def test_a_rules_file_of_a_section_for_other_hosts_defines_the_ids_that_section_sets(tmp_path):
    (tmp_path / "site-rules.toml").write_text(
        '[[rule]]\nid = "site.shm"\ntitle = "shm"\nfact = "host.shm.total"\ncompare = "bytes"\nmin = "1GB"\n'
        'severity = "warning"\nprofiles = ["node"]\nsource = "site policy"\n'
        'fix = { title = "grow /dev/shm", steps = ["mount -o remount,size=8G /dev/shm"] }\n')
    config = write(tmp_path, '[[match]]\nhosts = ["gpu-z*"]\nrules = ["site-rules.toml"]\nset = ["site.shm.min=2GB"]\n')
    validated = run_cli("config", "validate", config)
    assert validated.returncode == 0, validated.stdout
    checked = run_cli("check", "--config", config, "--nvml-fixture", H200, "--profile", "node")
    assert checked.returncode in (0, 1), checked.stderr


def test_the_configuration_schema_accepts_good_files_and_refuses_typos(tmp_path):
    jsonschema = pytest.importorskip("jsonschema", reason="SKIPPED LOUDLY: jsonschema (a test dependency) is missing")
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    schema = json.loads(run_cli("schema", "config").stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert not list(validator.iter_errors(tomllib.loads(GOOD)))
    assert not list(validator.iter_errors(tomllib.loads(TYPOS)))  # rule ids are for config validate, not a schema
    for text in ('[defaults]\nprofle = "node"\n', '[defaults]\nprofile = "nodes"\n', '[[match]]\nprofile = "node"\n',
                 '[defaults]\nhosts = "x"\n', '[defaults]\nset = ["driver"]\n', 'foo = 1\n'):
        assert list(validator.iter_errors(tomllib.loads(text))), text
    assert "config" in run_cli("schema").stdout


# --- slurm: a broken configuration is unknown, never a drain ---------------------------------------------------

@pytest.mark.parametrize("state, reason", [("IDLE", ""), ("IDLE+DRAIN", "preflight: gpu.health gpu1 ECC")])
def test_slurm_with_a_broken_configuration_leaves_the_node_as_it_is(tmp_path, state, reason):
    bad = write(tmp_path, TYPOS)
    scontrol = fake_scontrol(tmp_path / "s", state, reason)
    for fixture in (H200, A100X2):  # healthy or not, preflight cannot judge with a broken configuration
        completed = run_cli("slurm", "--config", bad, "--nvml-fixture", fixture, "--scontrol", str(scontrol),
                            "--node", "n1")
        assert completed.returncode == 5, completed.stderr
        assert "UNKNOWN: the site configuration or rules cannot be used, so n1 is left as it is (%s" % state \
            in completed.stderr
        assert "%s:6: [[match]] 1: set" % bad in completed.stderr
    assert not [c for c in calls(tmp_path / "s") if c.startswith("update")]


# --- kept reports and syslog ------------------------------------------------------------------------------------

def test_report_dir_keeps_one_report_per_host_that_fleet_reads(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    assert run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--report-dir", str(reports)).returncode == 0
    assert run_cli("check", "--profile", "node", "--nvml-fixture", A100X2, "--report-dir", str(reports)).returncode == 1
    kept = sorted(p.name for p in reports.iterdir())
    assert kept == ["%s.json" % HOST], kept  # one per host, replaced
    report = json.loads((reports / kept[0]).read_text())
    assert report["ok"] is False and report["host"] == HOST and report["collected_at"]
    fleet = run_cli("fleet", str(reports), "--format", "json")
    assert fleet.returncode == 1 and HOST in fleet.stdout
    missing = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--report-dir", str(tmp_path / "none"))
    assert missing.returncode == 0 and "--report-dir %s: no such folder" % (tmp_path / "none") in missing.stderr
    assert "the report was not kept" in missing.stderr


def test_slurm_keeps_its_report_under_the_node_name(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    scontrol = fake_scontrol(tmp_path / "s")
    completed = run_cli("slurm", "--nvml-fixture", A100X2, "--scontrol", str(scontrol), "--node", "gpu07",
                        "--report-dir", str(reports))
    assert completed.returncode == 1
    assert json.loads((reports / "gpu07.json").read_text())["ok"] is False
    # A report folder that is gone costs a warning, never the node's admission.
    gone = run_cli("slurm", "--nvml-fixture", H200, "--scontrol", str(scontrol), "--node", "gpu07",
                   "--report-dir", str(tmp_path / "gone"))
    assert gone.returncode == 0 and "the report was not kept" in gone.stderr


@pytest.fixture
def syslog_socket(tmp_path):
    path = str(tmp_path / "log.sock")
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(path)
    receiver.settimeout(5)
    yield path, receiver
    receiver.close()


@pytest.mark.slow
def test_syslog_gets_one_line_per_run(tmp_path, syslog_socket):
    path, receiver = syslog_socket
    env = {"PREFLIGHT_SYSLOG_SOCKET": path}
    assert run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--syslog", env=env).returncode == 0
    line = receiver.recv(65536).decode()
    assert line.startswith("<30>preflight[") and "]: preflight: OK: " in line and "node profile" in line, line
    scontrol = fake_scontrol(tmp_path / "s")
    assert run_cli("slurm", "--nvml-fixture", A100X2, "--scontrol", str(scontrol), "--node", "n1", "--syslog",
                   env=env).returncode == 1
    line = receiver.recv(65536).decode()
    assert line.startswith("<27>preflight[") and "FAILED" in line and "drained n1" in line, line
    with pytest.raises(socket.timeout):
        receiver.recv(65536)  # one line per run


def test_syslog_that_does_not_answer_is_a_warning(tmp_path):
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--syslog",
                        env={"PREFLIGHT_SYSLOG_SOCKET": str(tmp_path / "nobody.sock")})
    assert completed.returncode == 0 and "--syslog: cannot write to the system log" in completed.stderr


# --- quiet gates: exec says one line when it passes; jsonl everywhere a report is written ----------------------

def test_exec_passing_is_one_line_failing_is_the_report(tmp_path):
    passing = run_cli("exec", "--profile", "node", "--nvml-fixture", H200, "--", "true")
    assert passing.returncode == 0
    lines = passing.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("preflight: OK: ") and "on %s; starting true" % HOST in lines[0]
    verbose = run_cli("exec", "--verbose", "--profile", "node", "--nvml-fixture", H200, "--", "true")
    assert len(verbose.stderr.splitlines()) > 5
    failing = run_cli("exec", "--profile", "node", "--nvml-fixture", A100X2, "--", "true")
    assert failing.returncode == 78 and "gpu.health" in failing.stderr and len(failing.stderr.splitlines()) > 3
    jsonl = run_cli("exec", "--format", "jsonl", "--profile", "node", "--nvml-fixture", H200, "--", "true")
    records = [line for line in jsonl.stderr.splitlines() if line.startswith("{")]
    assert len(records) == 1 and json.loads(records[0])["schema"] == "preflight.report/1"


@pytest.mark.parametrize("argv, schema", [
    (["check", "--profile", "node", "--nvml-fixture", H200], "preflight.report/1"),
    (["facts", "--nvml-fixture", H200], "preflight.facts/1"),
    (["plan", "--workload", "gelan-c"], "preflight.plan/1"),
])
def test_jsonl_is_one_compact_document_per_line(argv, schema):
    completed = run_cli(*argv, "--format", "jsonl")
    assert completed.returncode in (0, 1), completed.stderr
    lines = completed.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["schema"] == schema


def test_jsonl_for_diagnose_and_fleet(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: No CUDA GPUs are available\n")
    diagnosed = run_cli("diagnose", str(log), "--no-facts", "--format", "jsonl")
    assert len(diagnosed.stdout.splitlines()) == 1 and json.loads(diagnosed.stdout)["schema"] == "preflight.diagnosis/1"
    reports = tmp_path / "reports"
    reports.mkdir()
    run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--report-dir", str(reports))
    fleet = run_cli("fleet", str(reports), "--format", "jsonl")
    assert len(fleet.stdout.splitlines()) == 1 and json.loads(fleet.stdout)["schema"] == "preflight.fleet/1"


# --- the prolog: the job's GPUs, no Slurm command ----------------------------------------------------------------

def prolog(fixture, env, *more):
    return run_cli("slurm", "--prolog", "--nvml-fixture", fixture, *more, env=dict({"SLURM_JOB_ID": "42"}, **env))


def test_prolog_passes_a_job_whose_gpus_are_healthy_and_hands_on_other_gpus_faults():
    completed = prolog(MISSING_AND_LOST, {"SLURM_JOB_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert completed.returncode == 0, completed.stderr
    assert "preflight: prolog job 42: GPUs 0,1 of 7, from SLURM_JOB_GPUS: OK" in completed.stderr
    assert "not this job's GPU, left to the health check: FAIL gpu.health gpu5" in completed.stderr


@pytest.mark.parametrize("env, said", [
    ({"SLURM_JOB_GPUS": "5"}, "FAIL gpu.health gpu5"),
    ({"CUDA_VISIBLE_DEVICES": "6-7"}, "FAIL job GPU 7: not on this node (NVML lists 0, 1, 2, 3, 4, 5, 6)"),
])
def test_prolog_fails_a_job_given_a_lost_or_missing_gpu(env, said):
    completed = prolog(MISSING_AND_LOST, env)
    assert completed.returncode == 1 and said in completed.stderr and "FAILED" in completed.stderr, completed.stderr


def test_prolog_fails_for_a_node_wide_fault_and_names_no_gpu_for_a_cpu_job(tmp_path):
    completed = prolog(nvml_fixture("driver-not-loaded.json"), {}, "--expect-gpus", "1")
    assert completed.returncode == 1, completed.stderr
    assert "no GPU of 0 (neither SLURM_JOB_GPUS nor CUDA_VISIBLE_DEVICES is set" in completed.stderr


def test_prolog_calls_no_slurm_command(tmp_path):
    completed = run_cli("slurm", "--prolog", "--scontrol", str(fake_scontrol(tmp_path)), "--nvml-fixture", H200)
    assert completed.returncode == 0 and "--prolog calls no Slurm command: --scontrol ignored" in completed.stderr
    path_with_scontrol = "%s:%s" % (tmp_path, os.environ.get("PATH", ""))
    passing = prolog(H200, {"SLURM_JOB_GPUS": "0", "PATH": path_with_scontrol})
    assert passing.returncode == 0 and "GPUs 0 of 1, from SLURM_JOB_GPUS: OK" in passing.stderr
    assert calls(tmp_path) == []


def test_job_gpus_from_the_prolog_environment():
    from preflight.integrations.slurm import job_gpus

    assert job_gpus({"SLURM_JOB_GPUS": "0,2-3", "CUDA_VISIBLE_DEVICES": "9"}) == ((0, 2, 3), "SLURM_JOB_GPUS")
    assert job_gpus({"CUDA_VISIBLE_DEVICES": "1"}) == ((1,), "CUDA_VISIBLE_DEVICES")
    assert job_gpus({"CUDA_VISIBLE_DEVICES": "GPU-8f3e"})[0] is None
    assert job_gpus({})[0] is None


def _slow_nvml(tmp_path, times: int) -> dict:
    """An environment whose replayed NVML takes 4 s to initialise the first ``times`` times (a busy host, a hung
    driver), as a real process sees it: a sitecustomize that slows the replay, counting in a file."""
    site = tmp_path / "site"
    site.mkdir()
    count = tmp_path / "inits"
    (site / "sitecustomize.py").write_text(
        "import os, time\n"
        "from preflight.probes import nvml_replay\n"
        "_call = nvml_replay.ReplayBinding._call\n"
        "def _slow(self, name, args, kwargs):\n"
        "    if name in ('nvmlInit', 'nvmlInitWithFlags'):\n"
        "        with open(%r, 'a+') as handle:\n"
        "            handle.write('x')\n"
        "            handle.seek(0)\n"
        "            done = len(handle.read())\n"
        "        if done <= %d:\n"
        "            time.sleep(4)\n"
        "    return _call(self, name, args, kwargs)\n"
        "nvml_replay.ReplayBinding._call = _slow\n" % (str(count), times))
    return {"PYTHONPATH": "%s:%s" % (site, os.environ.get("PYTHONPATH", "")), "SLURM_JOB_ID": "42"}


@pytest.mark.parametrize("times, job, code, said", [
    (1, {"SLURM_JOB_GPUS": "0"}, 0, "GPUs 0 of 1, from SLURM_JOB_GPUS: OK"),  # late once: asked again, answered
    (2, {"SLURM_JOB_GPUS": "0"}, 1, "FAIL nvml: NVML gave no answer within 2.0 s, twice"),
    (2, {}, 0, "no GPU of ? (neither SLURM_JOB_GPUS nor CUDA_VISIBLE_DEVICES is set"),  # a CPU job starts
])
def test_the_prolog_asks_a_slow_nvml_twice_and_fails_only_a_job_with_gpus(tmp_path, times, job, code, said):
    completed = run_cli("slurm", "--prolog", "--profile", "node", "--nvml-fixture", H200, "--timeout", "2",
                        env=dict(_slow_nvml(tmp_path, times), **job))
    assert completed.returncode == code, completed.stderr
    assert "NVML gave no answer within 2.0 s; asking once more" in completed.stderr
    assert said in completed.stderr, completed.stderr
    if times == 2:  # what NVML's silence left unknown, said once
        assert completed.stderr.count("UNKNOWN without NVML: nvml.init, gpu.count, gpu.health") == 1
        assert ("left to the health check: UNKNOWN without NVML" in completed.stderr) == (not job), completed.stderr
