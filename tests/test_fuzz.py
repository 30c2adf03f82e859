"""Property-based tests: whatever a snapshot or a command line holds, only documented exit codes and valid output.

Mutated facts snapshots (wrong types, nulls, huge numbers, NaN, deleted keys) go through check, diagnose
and plan; random command lines go through the real click parser. Each runs the real ``preflight.cli.main``
in this process (a subprocess per example would take minutes), with its standard streams captured.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import tempfile
import time

import pytest
from conftest import ScriptedHttp, nvml_fixture, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflight import cli
from preflight.probes import process

DOCUMENTED = {0, 1, 2}
FIXTURES = ("h200-driver580.json", "2x-a100-40g-driver550-ecc.json", "rtx3060-12g-driver525.json")
BASES = [json.loads(run_cli("facts", "--nvml-fixture", nvml_fixture(name)).stdout) for name in FIXTURES]
for base in BASES:  # a torch that a rule can judge, so that the torch facts are read too
    base["python"]["torch"] = {"installed": True, "location": "/x/torch", "version": "2.11.0+cu130", "cuda": "13.0",
                               "hip": None, "extension": {"path": "/x/torch/_C.so", "size": 1, "mtime_ns": 1},
                               "error": None}
    base["torch_arch"] = {"flags": ["sm_80", "sm_90", "sm_100"], "source": "cache"}
    base["probes"]["torch_arch"] = {"status": "ok", "seconds": 0.1, "error": None}
WORK = tempfile.mkdtemp(prefix="preflight-fuzz-")
LOG = os.path.join(WORK, "train.log")
with open(LOG, "w") as handle:
    handle.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
                 "capacity of 11.76 GiB of which 3.19 MiB is free.\nRuntimeError: The NVIDIA driver on your system "
                 "is too old (found version 11040).\n")


EMPTY = tempfile.mkdtemp(prefix="preflight-fuzz-cwd-")


def run_main(argv):
    """The real CLI in this process: (exit code, stdout, stderr). It runs in an empty working folder, which must
    stay empty: no command line writes a file it was not asked to."""
    out, err = io.StringIO(), io.StringIO()
    code = None
    here = os.getcwd()
    os.chdir(EMPTY)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(list(argv))
        except SystemExit as exc:
            code = exc.code
        finally:
            process.reopen()  # main() closed helpers on its way out, as the real process would exit
            os.chdir(here)
    assert os.listdir(EMPTY) == [], (argv, os.listdir(EMPTY))
    return code, out.getvalue(), err.getvalue()


def strict_json(text):
    def refuse(name):
        raise ValueError("%s in machine-readable output" % name)
    return json.loads(text, parse_constant=refuse)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10 ** 30), max_value=10 ** 30) | st.sampled_from([10 ** 400])
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, prefix + (index,))


@st.composite
def mutated_snapshots(draw):
    snapshot = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        paths = [p for p in _paths(snapshot) if p]
        path = draw(st.sampled_from(paths))
        parent = snapshot
        for key in path[:-1]:
            parent = parent[key]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values)
    return snapshot


def _write(snapshot):
    handle, path = tempfile.mkstemp(dir=WORK, suffix=".json")
    with os.fdopen(handle, "w") as out:
        json.dump(snapshot, out, allow_nan=True)  # NaN and Infinity as a careless writer would put them
    return path


@pytest.mark.slow
@settings(max_examples=75, deadline=None, suppress_health_check=list(HealthCheck))
@given(mutated_snapshots(), st.sampled_from(["train", "inference", "node"]))
def test_mutated_snapshots_give_documented_exit_codes_and_valid_json(snapshot, profile):
    path = _write(snapshot)
    try:
        for argv in (["check", "--facts", path, "--profile", profile, "--format", "json"],
                     ["check", "--facts", path, "--workload", "yolov9-c", "--format", "json"],
                     ["check", "--facts", path, "--profile", profile, "--format", "prometheus"],
                     ["diagnose", LOG, "--facts", path, "--format", "json"],
                     ["plan", "--workload", "yolov9-s", "--facts", path, "--format", "json"]):
            code, out, err = run_main(argv)
            assert code in DOCUMENTED, (argv, code, err)
            assert "Traceback" not in err and "internal error" not in err, err
            if code == 2:
                assert err.startswith("preflight: error:") and out == "", err
            elif "json" in argv:
                strict_json(out)
    finally:
        os.unlink(path)


OPTION_WORDS = ["--profile", "train", "node", "inference", "--strict", "--select", "--ignore", "gpu", "driver", "x",
                "--set", "gpu.count.min=2", "driver.version.min=535", "gpu.memory.min=8GB", "a=b", "--format",
                "json", "text", "junit", "prometheus", "nfd", "npd", "markdown", "--timeout", "0", "-1", "inf",
                "1e300", "nan", "5", "--workload", "yolov9-c", "yolov9-x", "--batch", "16", "-3", "10000000000",
                "--img", "640", "99999999999", "--task", "--fp32", "--half", "--quiet", "--color", "always",
                "--expires-in", "1h", "forever", "--gpu", "3060", "--no-facts", "--list", "--", "-", ""]


@settings(max_examples=75, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["check", "plan", "rules", "explain", "diagnose", "facts"]),
       st.lists(st.sampled_from(OPTION_WORDS) | st.text(max_size=8), max_size=8))
def test_random_command_lines_give_documented_exit_codes(command, words):
    argv = [command] + words
    if command in ("check", "diagnose"):
        argv += ["--facts", _BASE_FILE] if "--facts" not in words and "--no-facts" not in words else []
    if command == "diagnose" and not any(w == LOG for w in words):
        argv.insert(1, LOG)
    if command == "facts":
        argv += ["--nvml-fixture", nvml_fixture("h200-driver580.json")]
    code, out, err = run_main(argv)
    assert code in DOCUMENTED, (argv, code, err)
    assert "Traceback" not in err and "internal error" not in err, (argv, err)
    if code in (0, 1) and "json" in words and words.index("json") > 0 and words[words.index("json") - 1] == "--format":
        strict_json(out)


_BASE_FILE = _write(BASES[0])


def test_nan_never_reaches_machine_readable_output():
    snapshot = copy.deepcopy(BASES[0])
    snapshot["host"]["cpu"]["cgroup_quota"] = math.nan
    code, out, err = run_main(["check", "--facts", _write(snapshot), "--format", "json"])
    assert code == 2 and "host.cpu.cgroup_quota: expected a finite number, found nan" in err \
        or "NaN is not a number JSON allows" in err, err


# --- the prolog's own input never fails a job -------------------------------------------------------------------

_GPU_LISTS = st.one_of(
    st.text(alphabet="0123456789,-²٣ abcGPU-MIG", max_size=40),
    st.builds(lambda a, b: "%d-%d" % (a, b), st.integers(0, 10 ** 13), st.integers(0, 10 ** 13)),
    st.builds(lambda n: "9" * n, st.integers(1, 5000)),
    st.sampled_from(["0-99999999", "0-999999999999", "²", "GPU-1b2c,MIG-3", "0,,1", "-", "0-", "-3", "1-0"]))
_PROLOG_WORDS = st.lists(st.sampled_from([
    "--node", "hux01", "--scontrol", "/bin/false", "--slurm-conf", "/nope", "--timeout", "nan", "--timeout", "-1",
    "--set", '"x', "--select", "nope.rule", "--profile", "bogus", "--bogus", "--expect-gpus", "x", "--dry-run",
    "--config", "/no/such/file", "--rules", "/no/such/rules.toml", "--", "extra"]), max_size=6)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(_GPU_LISTS, _GPU_LISTS, _PROLOG_WORDS, st.sampled_from(["", "--timeout nan", '--set "x', "--select", "--node x"]))
def test_the_prologs_own_input_never_fails_a_job(job_gpus, visible, words, environment_args):
    """Slurm drains a node on any prolog exit but 0: whatever the prolog's command line, PREFLIGHT_ARGS or GPU
    variables hold, it exits 0, or 1 only where the job was given a GPU the (healthy, replayed) node does not have."""
    variables = {"SLURM_JOB_GPUS": job_gpus, "CUDA_VISIBLE_DEVICES": visible, "PREFLIGHT_ARGS": environment_args}
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        code, out, err = run_main(["slurm", "--prolog", "--nvml-fixture", nvml_fixture("h200-driver580.json")]
                                  + list(words))
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    # Exit 1 only for the job's own GPU missing from the node (Slurm gave it a GPU NVML does not list): a node fault.
    failed = [line for line in err.splitlines() if ": FAIL " in line]
    assert code == 0 or (code == 1 and failed and all("not on this node" in line for line in failed)), (
        job_gpus[:40], visible[:40], words, environment_args, code, err[-800:])
    assert "Traceback" not in err


# --- fleet URLs: whatever the URL, whatever answers it --------------------------------------------------------------

_ANSWERS = [b"", b"SSH-2.0-OpenSSH_9.6\r\n", b"HTTP/1.0 200 OK\r\n\r\n{}", b"HTTP/1.0 200 OK\r\n\r\n\x00\xff",
            b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n{}", b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n{",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n",
            b"HTTP/1.0 302 Found\r\nLocation: file:///etc/shadow\r\n\r\n", b"HTTP/9.9 999 What\r\n\r\n",
            b"HTTP/1.0 200 OK\r\n" + b"X: y\r\n" * 200 + b"\r\n", b"HTTP/1.0 503 Busy\r\n\r\n",
            b"HTTP/1.0 200 OK\r\n\r\n" + json.dumps({"schema": "preflight.report/1", "ok": "yes"}).encode()]


def _scripted(connection, stopping):
    connection.sendall(_ANSWERS[int(time.monotonic() * 1000) % len(_ANSWERS)])


_SERVER = ScriptedHttp(_scripted)
_LIVE = _SERVER.url.rsplit(":", 1)[1]
_HOSTS = st.sampled_from(["127.0.0.1", "[::1]", "localhost", "[", "]", "", "[::1", "127.0.0.1:", "a b", "\x1b[31m",
                          "%00", "user@127.0.0.1", "xn--", "."]) | st.text(max_size=8)
_PORTS = st.sampled_from(["", ":" + _LIVE, ":0", ":65536", ":-1", ":abc", ":" + "9" * 30, ":"]) | st.text(max_size=4)
_PATHS = st.sampled_from(["", "/", "/report", "/metrics", "/../../etc/passwd", "/%ff", "?q=1", "#frag"]) \
    | st.text(max_size=10)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["http://", "https://"]), _HOSTS, _PORTS, _PATHS)
def test_any_fleet_url_gives_a_documented_exit_within_the_deadline(scheme, host, port, path):
    from preflight.fleet import read

    url = scheme + host + port + path
    saved, read.URL_TIMEOUT = read.URL_TIMEOUT, 2.0
    started = time.monotonic()
    try:
        code, out, err = run_main(["fleet", url, "--format", "json"])
    finally:
        read.URL_TIMEOUT = saved
    assert time.monotonic() - started < 20, url
    assert code in DOCUMENTED and "Traceback" not in err and "internal error" not in err, (url, code, err[-600:])
    if code == 2:
        assert "\x1b" not in err
