"""Regressions from the red-team run: hostile or broken input never executes code, crashes or lies."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import ScriptedHttp, nvml_fixture, run_cli

H200 = nvml_fixture("h200-driver580.json")


def _rule_file(tmp_path: Path, body: str, name: str = "site.toml") -> str:
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def _packages_rule(required: str) -> str:
    return ('[[rule]]\nid = "site.pkg"\ntitle = "site package"\nfact = "python.packages"\ncompare = "present"\n'
            'required = %s\nprofiles = ["train"]\n' % required)


# --- a rule file never makes preflight import or run code ---------------------------------------

def _sneaky_package(root: Path, marker: Path) -> None:
    package = root / "sneaky"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("open(%r, 'w').write('imported')\nprint('SNEAKY RAN')\n" % str(marker))
    (package / "sub.py").write_text("")


def test_a_dotted_requirement_does_not_import_its_parent_in_process(tmp_path):
    marker = tmp_path / "imported"
    _sneaky_package(tmp_path / "site", marker)
    rules = _rule_file(tmp_path, _packages_rule('["sneaky.sub", "sneaky.nothere", "this.x"]'))
    completed = run_cli("check", "--rules", rules, "--select", "site", "--format", "json",
                        env={"PYTHONPATH": str(tmp_path / "site")})
    report = json.loads(completed.stdout)  # nothing printed by an imported module spoils the JSON
    assert not marker.exists() and "SNEAKY RAN" not in completed.stdout
    assert "Beautiful is better than ugly" not in completed.stdout + completed.stderr  # `this` was not imported
    message = report["results"][0]["message"]
    assert "sneaky.nothere is missing" in message and "this.x is missing" in message
    assert "sneaky.sub is missing" not in message


def test_a_dotted_requirement_does_not_import_its_parent_under_python(tmp_path, fake_env):
    env = fake_env()
    marker = tmp_path / "imported"
    _sneaky_package(env.site, marker)
    rules = _rule_file(tmp_path, _packages_rule('["sneaky.sub", "this.x"]'))
    completed = run_cli("check", "--rules", rules, "--select", "site", "--python", env.python, "--format", "json")
    report = json.loads(completed.stdout)
    assert not marker.exists()
    assert report["results"][0]["message"].startswith("this.x is missing;")


def test_a_module_name_that_is_not_one_is_refused_when_the_rules_load(tmp_path):
    rules = _rule_file(tmp_path, _packages_rule('["x"]') + '[rule.packages.x]\nimport = "os; import this"\n')
    completed = run_cli("check", "--rules", rules, "--select", "site")
    assert completed.returncode == 2 and "is not a Python module name" in completed.stderr


# --- thresholds that would silently give a wrong verdict --------------------------------------

@pytest.mark.parametrize("setting, problem", [
    ("gpu.count.min=nan", "expected a finite number, got 'nan'"),
    ("gpu.count.min=inf", "expected a finite number, got 'inf'"),
    ("gpu.count.min=-inf", "expected a finite number"),
    ("gpu.memory.min=24", "a size needs a unit, got '24': write it as 24GB"),
    ("gpu.memory.min=24.5", "a size needs a unit"),
    ("driver.version.min=nan", "'nan' is not a version"),
])
def test_set_rejects_thresholds_that_cannot_mean_what_was_meant(setting, problem):
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--set", setting)
    assert completed.returncode == 2 and problem in completed.stderr, completed.stderr


@pytest.mark.parametrize("threshold, problem", [
    ("min = nan", "expected a finite number"),
    ("min = inf", "expected a finite number"),
    ("min = 1e400", "expected a finite number"),
])
def test_rule_files_reject_non_finite_thresholds(tmp_path, threshold, problem):
    rules = _rule_file(tmp_path, '[[rule]]\nid = "gpu.count"\ntitle = "GPUs"\nfact = "visibility.count"\n'
                                 'compare = "number"\n%s\nprofiles = ["node"]\n' % threshold)
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--rules", rules)
    assert completed.returncode == 2 and problem in completed.stderr, completed.stderr


def test_rule_files_need_a_unit_on_sizes(tmp_path):
    rules = _rule_file(tmp_path, '[[rule]]\nid = "gpu.memory"\ntitle = "memory"\nfact = "gpu.memory.total"\n'
                                 'compare = "bytes"\nmin = 24\nprofiles = ["node"]\n')
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--rules", rules)
    assert completed.returncode == 2 and "a size needs a unit, got 24" in completed.stderr, completed.stderr
    assert run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--set", "gpu.memory.min=0").returncode == 0


# --- unbounded work from options -----------------------------------------------------------------

@pytest.mark.parametrize("args, problem", [
    (["--batch", "10000000000"], "--batch 10000000000 is more than 1000000 images"),
    (["--img", "99999999999"], "--img must be from 32 to 16384 pixels"),
    (["--img", "8"], "--img must be from 32 to 16384 pixels"),
])
def test_workload_options_are_bounded(args, problem):
    for command in (["check", "--nvml-fixture", H200], ["plan", "--nvml-fixture", H200]):
        completed = run_cli(*command, "--workload", "yolov9-c", *args)
        assert completed.returncode == 2 and problem in completed.stderr, completed.stderr


def test_the_largest_batch_still_answers_arithmetically():
    report = json.loads(run_cli("check", "--nvml-fixture", H200, "--select", "gpu.memory.workload", "--workload",
                                "yolov9-c", "--batch", "1000000", "--img", "16384", "--format", "json").stdout)
    result = report["results"][0]
    assert result["status"] == "fail"
    # No torchrun suggestion over thousands of GPUs, and no device list of that length.
    assert not any("torchrun" in command for command in result["fix"]["commands"])


# --- odd values that used to end in "internal error" ------------------------------------------

@pytest.mark.parametrize("value", ["inf", "1e300", "nan", "-1", "3601"])
def test_timeout_must_be_a_sensible_number_of_seconds(value):
    completed = run_cli("check", "--timeout", value, "--nvml-fixture", H200)
    assert completed.returncode == 2 and "--timeout must be more than 0 and at most 3600 seconds" in completed.stderr


def test_unicode_digits_in_cuda_visible_devices_name_no_gpu():
    report = json.loads(run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--select", "gpu.count",
                                "--format", "json", env={"CUDA_VISIBLE_DEVICES": "\u00b2"}).stdout)
    assert report["results"][0]["status"] == "fail" and "0 GPU(s) visible" in report["results"][0]["message"]


def test_an_empty_command_name_is_not_found():
    completed = run_cli("exec", "--profile", "node", "--nvml-fixture", H200, "--", "")
    assert completed.returncode == 127 and "empty command name" in completed.stderr


@pytest.mark.parametrize("argv", [["check", "--facts", "-"], ["diagnose", "-"], ["diagnose"]])
def test_a_closed_standard_input_is_a_clear_error(argv):
    import subprocess
    import sys

    from conftest import NEUTRAL_CWD, clean_env

    completed = subprocess.run("exec <&-; exec %s -m preflight %s" % (sys.executable, " ".join(argv)), shell=True,
                               capture_output=True, text=True, env=clean_env(), cwd=NEUTRAL_CWD)
    assert completed.returncode in (0, 2) and "Traceback" not in completed.stderr, completed.stderr
    if argv != ["diagnose"]:
        assert completed.returncode == 2 and "standard input is closed" in completed.stderr


@pytest.mark.parametrize("text", ["a = " + "[" * 5000 + "]" * 5000, "[a]\n" + "b = {c = " * 3000 + "1" + "}" * 3000],
                         ids=["arrays", "inline-tables"])
def test_deeply_nested_rule_files_exit_2(tmp_path, text):
    completed = run_cli("check", "--rules", _rule_file(tmp_path, text), "--nvml-fixture", H200)
    assert completed.returncode == 2 and "Traceback" not in completed.stderr, completed.stderr


def test_empty_profiles_is_an_error(tmp_path):
    rules = _rule_file(tmp_path, '[[rule]]\nid = "site.x"\ntitle = "x"\nfact = "visibility.count"\n'
                                 'compare = "number"\nmin = 1\nprofiles = []\n')
    completed = run_cli("rules", "--rules", rules)
    assert completed.returncode == 2 and "'profiles' is empty, so the rule would never run" in completed.stderr


# --- non-regular and oversized inputs -------------------------------------------------------------

def test_a_fifo_in_a_rules_folder_does_not_block(tmp_path):
    import os

    folder = tmp_path / "rules"
    folder.mkdir()
    os.mkfifo(str(folder / "x.toml"))
    completed = run_cli("check", "--rules", str(folder), "--nvml-fixture", H200, timeout=30)
    assert completed.returncode == 2 and "not a regular file" in completed.stderr


@pytest.mark.parametrize("option", ["--facts", "--nvml-fixture"])
def test_device_files_are_not_read_as_input(option):
    completed = run_cli("check", option, "/dev/zero", timeout=30)
    assert completed.returncode == 2 and "not a regular file" in completed.stderr


def test_oversized_facts_file_is_refused(tmp_path):
    big = tmp_path / "facts.json"
    with open(str(big), "wb") as out:
        out.truncate(65 << 20)  # sparse: 65 MiB on paper
    completed = run_cli("check", "--facts", str(big))
    assert completed.returncode == 2 and "more than the 64 MiB" in completed.stderr


def test_a_malformed_system_outcome_in_an_nvml_fixture_is_the_files_fault(tmp_path):
    from conftest import write_fixture

    def spoil(data):
        data["system"]["nvmlSystemGetDriverVersion"] = "580.95.05"  # not {"ok": ...}

    fixture = write_fixture(tmp_path, "h200-driver580.json", spoil)
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", fixture)
    assert completed.returncode == 2
    assert "system.nvmlSystemGetDriverVersion: an outcome must be" in completed.stderr


# --- answers from helpers and the cache -----------------------------------------------------------

@pytest.mark.parametrize("answer, problem", [
    ('{"version": 3}', "version: expected a string, found the number 3"),
    ('{"packages": null}', "packages: expected an object, found null"),
    ('[1, 2]', "expected an object"),
    ('{"version": NaN}', "not the probe's answer"),
])
def test_a_python_that_answers_in_the_wrong_shape_is_an_unknown_not_a_crash(tmp_path, answer, problem):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho '%s'\n" % answer)
    python.chmod(0o755)
    completed = run_cli("check", "--select", "python.packages", "--python", str(python), "--format", "json")
    assert completed.returncode == 1, completed.stderr
    result = json.loads(completed.stdout)["results"][0]
    assert result["status"] == "error" and problem in result["message"], result["message"]


def test_a_bad_torch_arch_cache_entry_is_a_miss_and_is_rewritten(tmp_path, fake_env):
    env = fake_env()
    env.add_torch(arch_flags="sm_80 sm_90")
    cache = tmp_path / "cache"
    cache.mkdir()
    run = lambda: run_cli("check", "--python", env.python, "--select", "torch.arch", "--format", "json",  # noqa: E731
                          "--nvml-fixture", H200, env={"PREFLIGHT_CACHE_DIR": str(cache)})
    first = run()
    assert first.returncode in (0, 1), first.stderr
    path = cache / "torch-arch-flags.json"
    entries = json.loads(path.read_text())
    key = next(iter(entries))
    good = entries[key]
    assert good["flags"] == ["sm_80", "sm_90"] and good["digest"]
    for bad in ({key: [1, None]}, {key: "sm_90"}, [key], {key: {"x": 1}}, {key: ["sm_80", "sm_90"]},
                {key: dict(good, flags=["sm_80"])}):
        path.write_text(json.dumps(bad))
        again = run()
        assert again.returncode == first.returncode, again.stderr
        assert json.loads(again.stdout)["results"][0]["status"] == json.loads(first.stdout)["results"][0]["status"]
        assert json.loads(path.read_text()) == {key: good}  # rewritten whole


# --- replaying without nvidia-ml-py --------------------------------------------------------------

def test_a_replay_without_nvidia_ml_py_reports_it_as_the_live_path_does(tmp_path):
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "pynvml.py").write_text("raise ImportError('No module named pynvml (blocked for this test)')\n")
    completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--format", "json",
                        env={"PYTHONPATH": str(blocked)})
    assert completed.returncode == 1, completed.stderr
    result = [r for r in json.loads(completed.stdout)["results"] if r["id"] == "nvml.init"][0]
    assert result["status"] == "fail" and "nvidia-ml-py" in result["message"]
    assert result["fix"] and "pip install" in " ".join(result["fix"]["commands"])
    # A bad fixture is still the file's fault, pynvml or not.
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    completed = run_cli("check", "--nvml-fixture", str(bad), env={"PYTHONPATH": str(blocked)})
    assert completed.returncode == 2 and "'format' must be" in completed.stderr


# --- second round: malformed reports, odd values, no internal errors --------------------------------------

@pytest.mark.parametrize("spoil, problem", [
    (lambda r: r["results"][0].update(fix="drain it"), "results[0].fix must be null or an object"),
    (lambda r: r["results"][0].update(fix={"title": "t", "steps": 3, "commands": []}), "results[0].fix must be"),
    (lambda r: r["results"][0].update(status="broken"), "results[0].status must be one of"),
    (lambda r: r["results"][0].pop("status"), "results[0].status must be one of"),
    (lambda r: r["results"][0].update(severity=None), "results[0].severity must be one of"),
    (lambda r: r["results"].append(7), "must be an object"),
    (lambda r: r.pop("ok"), "'ok' must be true or false"),
    (lambda r: r.update(inventory=[1]), "'inventory' must be an object"),
])
def test_one_malformed_report_is_listed_and_the_fleet_goes_on(tmp_path, spoil, problem):
    good = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--format", "json").stdout
    (tmp_path / "good.json").write_text(good)
    bad = json.loads(run_cli("check", "--profile", "node", "--nvml-fixture",
                             nvml_fixture("2x-a100-40g-driver550-ecc.json"), "--format", "json").stdout)
    spoil(bad)
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    for output_format in ("json", "text", "html", "csv", "markdown"):
        completed = run_cli("fleet", str(tmp_path), "--format", output_format)
        assert completed.returncode == 0, (output_format, completed.stderr)  # the one node read is OK
    document = json.loads(run_cli("fleet", str(tmp_path), "--format", "json").stdout)
    assert document["summary"]["nodes"] == 1 and document["summary"]["unreadable"] == 1
    assert problem in document["unreadable"][0]["reason"], document["unreadable"]


def test_nfd_with_an_unknown_memory_total_is_not_an_internal_error(tmp_path):
    facts = json.loads((Path(__file__).parent / "fixtures" / "reference-facts.json").read_text())
    facts["nvml"]["gpus"][0]["memory"]["total"] = None
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    completed = run_cli("check", "--facts", str(path), "--profile", "node", "--format", "nfd")
    assert completed.returncode in (0, 1), completed.stderr
    assert "preflight.ready=" in completed.stdout and "preflight.gpu.memory=" not in completed.stdout


def test_absurd_numbers_in_variables_and_options_are_clear(tmp_path):
    digits = "7" * 5000
    visible = run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--format", "json",
                      env={"CUDA_VISIBLE_DEVICES": digits})
    assert visible.returncode == 1, visible.stderr  # names no GPU: CUDA would see none
    assert "internal error" not in visible.stderr
    for args in (["--expect-gpus", digits], ["--set", "gpu.count.min=" + digits],
                 ["--set", "driver.version.min=1." + digits]):
        completed = run_cli("check", "--profile", "node", "--nvml-fixture", H200, *args)
        assert completed.returncode == 2 and "internal error" not in completed.stderr, completed.stderr
        assert len(completed.stderr) < 600 and "characters)" in completed.stderr, completed.stderr


# --- the prolog's own input never drains a node (third round) ---------------------------------------------------

@pytest.mark.parametrize("variable", ["SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"])
@pytest.mark.parametrize("value", ["0-99999999", "0-999999999999", "9" * 5000, "\u00b2"])
def test_a_gpu_variable_that_names_no_index_of_the_node_is_no_gpu_not_a_crash(variable, value):
    completed = run_cli("slurm", "--prolog", "--nvml-fixture", H200, env={variable: value})
    assert completed.returncode == 0, completed.stderr
    assert "names no GPU index of this node" in completed.stderr and "Traceback" not in completed.stderr


@pytest.mark.parametrize("args, env", [
    (["--timeout", "nan"], {}), (["--node", "hux01"], {}), (["--bogus"], {}),
    ([], {"PREFLIGHT_ARGS": '--set "x'}), ([], {"PREFLIGHT_ARGS": "--timeout nan"}),
])
def test_the_prologs_own_command_line_never_fails_the_job(args, env):
    completed = run_cli("slurm", "--prolog", "--nvml-fixture", H200, *args, env=env)
    assert completed.returncode == 0, completed.stderr
    assert "the job starts unchecked" in completed.stderr or "ignored (options of the health program's line)" in \
        completed.stderr


def test_the_prolog_dry_run_says_which_exit_it_would_give():
    failing = run_cli("slurm", "--prolog", "--dry-run", "--nvml-fixture", nvml_fixture("driver-not-loaded.json"),
                      "--expect-gpus", "1")
    assert failing.returncode == 0 and "the prolog would exit 1 (Slurm would drain the node" in failing.stderr
    passing = run_cli("slurm", "--prolog", "--dry-run", "--nvml-fixture", H200, env={"SLURM_JOB_GPUS": "0"})
    assert passing.returncode == 0 and "the prolog would exit 0 (the job would start)" in passing.stderr


def test_the_scontrol_timeout_must_be_positive():
    completed = run_cli("slurm", "--scontrol-timeout", "0", "--nvml-fixture", H200)
    assert completed.returncode == 2 and "must be more than 0" in completed.stderr


# --- fleet over HTTP: one deadline for the whole response, any URL or answer a clear error (third round) ---------

def _trickled_headers(connection, stopping):
    connection.sendall(b"HTTP/1.0 200 OK\r\n")
    number = 0
    while not stopping.is_set():  # a header every half second: each read is quick, the headers never end
        connection.sendall(b"X-Slow-%d: 1\r\n" % number)
        number += 1
        time.sleep(0.5)


def _huge_header_line(connection, stopping):
    connection.sendall(b"HTTP/1.0 200 OK\r\nX-Huge: ")
    block = b"a" * (1 << 20)
    for _ in range(100):  # 100 MB on one line, unless the client stops reading first
        if stopping.is_set():
            return
        connection.sendall(block)


def _answer_with(data: bytes):
    return lambda connection, stopping: connection.sendall(data)


def test_headers_trickled_by_a_serve_are_cut_at_the_one_deadline(monkeypatch):
    from preflight.fleet import read

    monkeypatch.setattr(read, "URL_TIMEOUT", 2.0)
    with ScriptedHttp(_trickled_headers) as server:
        started = time.monotonic()
        completed = run_cli("fleet", server.url, "--format", "json")
        took = time.monotonic() - started
    assert took < 8, took
    assert completed.returncode == 2 and server.url in completed.stderr
    assert "the report did not arrive within 2 s" in completed.stderr, completed.stderr


@pytest.mark.parametrize("answer, problem", [
    (_huge_header_line, "LineTooLong"),
    (_answer_with(b"SSH-2.0-OpenSSH_9.6\r\n"), "BadStatusLine"),
    (_answer_with(b""), "closed connection without response"),
    (_answer_with(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), "not an HTTP response"),
    (_answer_with(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{}"), "ended after 2 of 12 bytes"),
    (_answer_with(b"HTTP/1.0 301 Moved Permanently\r\nLocation: https://elsewhere/\r\n\r\n"),
     "redirects are not followed"),
    (_answer_with(b"HTTP/1.0 200 OK\r\n\r\n" + b"\xff\xfe<html>"), "not JSON"),
    (_answer_with(b"HTTP/1.0 200 OK\r\n\r\n{\"schema\": \"something.else/1\"}"), "neither a preflight report"),
])
def test_a_malformed_answer_is_exit_2_naming_the_url(answer, problem):
    with ScriptedHttp(answer) as server:
        started = time.monotonic()
        completed = run_cli("fleet", server.url, "--format", "json")
    assert time.monotonic() - started < 30
    assert completed.returncode == 2, completed.stderr
    assert server.url in completed.stderr and problem in completed.stderr, completed.stderr
    assert "Traceback" not in completed.stderr


@pytest.mark.parametrize("url", ["http://[::1", "http://", "http://:10480", "http://gpu07:99999", "http://gpu07:abc/",
                                 "https://[zz]/", "http://[::1]@", "http://gpu07 :10480", "http://gpu07:0"])
def test_a_malformed_url_is_exit_2_naming_it_before_anything_is_fetched(url):
    completed = run_cli("fleet", url, "--format", "json")
    assert completed.returncode == 2 and "is not a URL fleet can fetch" in completed.stderr, completed.stderr
    assert url.strip() in completed.stderr


def test_control_bytes_from_any_input_are_escaped_on_standard_error(tmp_path, fake_env):
    """An ESC sequence in a site configuration's value, a node name, a URL or a cache path would retitle or clear
    the terminal (or fake a line) if written raw: every message on standard error escapes it, as stdout does."""
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nset = ["gpu.count.min=\\u001b]0;owned\\u0007"]\n')
    runs = [run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--config", str(config)),
            run_cli("slurm", "--node", "gpu\x1b[2J07", "--nvml-fixture", H200, "--scontrol", "/bin/false"),
            run_cli("fleet", "http://gpu\x1b[2J07:10480"),
            run_cli("check", "--profile", "node", "--nvml-fixture", H200, "--select", "gpu.\x1b[2Jcount")]
    cache = tmp_path / "cache\x1b[2J"
    cache.write_text("a file where the cache folder should be: not used, and said so")
    env = fake_env()
    env.add_torch(version="2.5.1+cu118", cuda="11.8", arch_flags="sm_80 sm_90")
    runs.append(run_cli("check", "--python", env.python, "--select", "torch.arch", "--format", "json",
                        "--nvml-fixture", H200, env={"PREFLIGHT_CACHE_DIR": str(cache)}))
    for completed in runs:
        assert completed.stderr and "\x1b" not in completed.stderr and "\x07" not in completed.stderr, completed.stderr
        assert "\\x1b" in completed.stderr, completed.stderr
