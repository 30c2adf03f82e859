"""Slurm node admission: against a fake scontrol, and against a real Slurm cluster on loopback."""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import pytest
from conftest import NEUTRAL_CWD, clean_env, nvml_fixture, run_cli

from preflight.integrations import slurm as admission

H200 = nvml_fixture("h200-driver580.json")
A100X2 = nvml_fixture("2x-a100-40g-driver550-ecc.json")
NO_LIBRARY = nvml_fixture("no-library.json")
NODE = socket.gethostname().split(".")[0]


# --- against a fake scontrol ------------------------------------------------------------------

def fake_scontrol(tmp_path: Path, state: str = "IDLE", reason: str = "", behaviour: str = "",
                  gres: str = "(null)", features: str = "(null)") -> Path:
    """An scontrol that answers `show node` from files and records every call."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "state").write_text(state)
    (tmp_path / "reason").write_text(reason)
    script = tmp_path / "scontrol"
    script.write_text("""#!/bin/sh
echo "$*" >> %(dir)s/calls
%(behaviour)s
if [ "$1" = update ]; then  # as slurmctld does: a drain sets the state and reason, a resume clears them
  case "$3" in
    State=DRAIN) echo "IDLE+DRAIN" > %(dir)s/state; printf '%%s' "${4#Reason=}" > %(dir)s/reason ;;
    State=RESUME) echo "IDLE" > %(dir)s/state; : > %(dir)s/reason ;;
  esac
fi
if [ "$1" = show ]; then
  reason=$(cat %(dir)s/reason)
  line="NodeName=$3 Arch=x86_64 Gres=%(gres)s AvailableFeatures=%(features)s ActiveFeatures=%(features)s State=$(cat %(dir)s/state) ThreadsPerCore=1 Partitions=debug"
  if [ -n "$reason" ]; then line="$line Reason=$reason [root@2026-11-30T00:01:26]"; fi
  echo "$line"
fi
""" % {"dir": tmp_path, "behaviour": behaviour, "gres": gres, "features": features})
    script.chmod(0o755)
    return script


def calls(tmp_path: Path):
    path = tmp_path / "calls"
    return path.read_text().splitlines() if path.exists() else []


def slurm(scontrol, fixture, *args, env=None):
    return run_cli("slurm", "--profile", "node", "--nvml-fixture", fixture, "--scontrol", str(scontrol),
                   "--node", "n1", *args, env=env)


def test_failing_checks_drain_with_the_rule_id_first(tmp_path):
    scontrol = fake_scontrol(tmp_path)
    completed = slurm(scontrol, A100X2)
    assert completed.returncode == 1
    update = [c for c in calls(tmp_path) if c.startswith("update")]
    assert update == ["update NodeName=n1 State=DRAIN Reason=preflight: gpu.health gpu1 NVIDIA A100-SXM4-40GB: "
                      "2 uncorrected ECC error(s) since the driver loaded; a row remapping is pending (reset the GPU "
                      "to apply it)"]
    assert "drained n1" in completed.stderr


def record_drain(node: str, reason: str) -> None:
    """As if this preflight had drained ``node`` (its record in the test's cache folder)."""
    admission.DrainRecord().set(node, reason)


def test_passing_checks_resume_only_what_preflight_drained(tmp_path):
    ours = fake_scontrol(tmp_path / "a")
    assert slurm(ours, A100X2).returncode == 1  # preflight drains it (and records the reason it set)
    assert (tmp_path / "a" / "state").read_text().strip() == "IDLE+DRAIN"
    completed = slurm(ours, H200)
    assert completed.returncode == 0
    assert calls(tmp_path / "a")[-1] == "update NodeName=n1 State=RESUME", calls(tmp_path / "a")
    admins = fake_scontrol(tmp_path / "b", "IDLE+DRAIN", "maintenance: new PSU")
    completed = slurm(admins, H200)
    assert completed.returncode == 0
    assert not [c for c in calls(tmp_path / "b") if c.startswith("update")]
    assert "stays IDLE+DRAIN: its reason is not preflight's (maintenance: new PSU)" in completed.stderr


def test_an_administrators_drain_in_preflights_words_is_not_resumed(tmp_path):
    # The red team's case: an administrator's reason that starts with "preflight:" is not preflight's.
    admins = fake_scontrol(tmp_path / "a", "IDLE+DRAIN", "preflight: hold for RMA 4411")
    completed = slurm(admins, H200)
    assert completed.returncode == 0 and not [c for c in calls(tmp_path / "a") if c.startswith("update")]
    assert "looks like preflight's, but preflight has no record of setting it here" in completed.stderr
    assert "scontrol update NodeName=n1 State=RESUME" in completed.stderr
    # Preflight's own drain, which an administrator then turned DOWN keeping the reason: the administrator's now.
    node = fake_scontrol(tmp_path / "b")
    slurm(node, A100X2)
    reason = (tmp_path / "b" / "reason").read_text()
    (tmp_path / "b" / "state").write_text("DOWN+DRAIN")
    completed = slurm(node, H200)
    assert completed.returncode == 0 and calls(tmp_path / "b")[-1].startswith("show")
    assert "it is DOWN+DRAIN, not only drained: someone else set that state (reason: %s)" % reason in completed.stderr


def test_an_administrators_reason_is_not_overwritten_and_no_repeat_drains(tmp_path):
    admins = fake_scontrol(tmp_path, "DOWN+DRAIN", "maintenance")
    assert slurm(admins, A100X2).returncode == 1
    assert not [c for c in calls(tmp_path) if c.startswith("update")]
    (tmp_path / "calls").unlink()
    # Drained by preflight for the same reason already: nothing to update.
    first = slurm(fake_scontrol(tmp_path), A100X2)
    assert [c for c in calls(tmp_path) if c.startswith("update")]
    (tmp_path / "calls").unlink()
    again = slurm(tmp_path / "scontrol", A100X2)
    assert first.returncode == again.returncode == 1
    assert not [c for c in calls(tmp_path) if c.startswith("update")]


@pytest.mark.parametrize("behaviour, problem", [
    ('echo "slurm_load_node error: Unable to contact slurm controller (connect failure)" >&2; exit 1',
     "scontrol show node n1 --oneliner failed: slurm_load_node error: Unable to contact slurm controller"),
    ('echo "Node n1 not found" >&2; exit 1', "is this node in slurm.conf (--node)"),
    ("sleep 60", "did not answer within 1 s"),
])
def test_a_failing_or_hanging_scontrol_is_reported_not_waited_on(tmp_path, behaviour, problem):
    scontrol = fake_scontrol(tmp_path, behaviour=behaviour)
    started = time.monotonic()
    completed = slurm(scontrol, H200, "--scontrol-timeout", "1s")
    assert time.monotonic() - started < 10
    assert completed.returncode == 4 and problem in completed.stderr, completed.stderr


def test_scontrol_missing(tmp_path, monkeypatch):
    completed = slurm(tmp_path / "nope", H200)
    assert completed.returncode == 4 and "no such executable" in completed.stderr
    # Without --scontrol and with nothing in PATH or the usual folders, it says where it looked.
    monkeypatch.setattr(admission, "SEARCH_DIRS", (str(tmp_path),))
    with pytest.raises(admission.SlurmError, match="cannot find scontrol in PATH or %s" % tmp_path):
        admission.find_scontrol(None, {"PATH": str(tmp_path)})


def test_slurm_conf_is_found_without_slurm_conf(tmp_path, monkeypatch):
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    assert admission.find_slurm_conf(str(conf), {}) == str(conf)
    assert admission.find_slurm_conf(None, {"SLURM_CONF": "/x/slurm.conf"}) == "/x/slurm.conf"
    monkeypatch.setattr(admission, "CONF_CANDIDATES", (str(tmp_path / "missing.conf"), str(conf)))
    assert admission.find_slurm_conf(None, {}) == str(conf)
    monkeypatch.setattr(admission, "CONF_CANDIDATES", (str(tmp_path / "missing.conf"),))
    assert admission.find_slurm_conf(None, {}) is None
    with pytest.raises(admission.SlurmError, match="no such file"):
        admission.find_slurm_conf(str(tmp_path / "nope.conf"), {})


def test_node_name_and_reason_parsing(tmp_path):
    assert admission.node_name(None, {"SLURMD_NODENAME": "gpu-17"}) == "gpu-17"
    assert admission.node_name("n3", {"SLURMD_NODENAME": "gpu-17"}) == "n3"
    assert admission.node_name(None, {}) == NODE
    scontrol = admission.Scontrol(str(fake_scontrol(tmp_path, "IDLE+DRAIN", "preflight: gpu.health x")), None, 5, {})
    info = scontrol.node("n1")
    assert (info.state, info.reason, info.partitions, info.gres_gpus) == ("IDLE+DRAIN", "preflight: gpu.health x",
                                                                          ("debug",), None)
    dry = slurm(fake_scontrol(tmp_path), A100X2, "--dry-run")
    assert "dry run, nothing changed: checks fail: would drain n1: preflight: gpu.health" in dry.stderr
    assert not [c for c in calls(tmp_path) if c.startswith("update")]


# --- a real Slurm cluster ---------------------------------------------------------------------------

SLURM_BINARIES = ("slurmctld", "slurmd", "scontrol", "sinfo", "sbatch", "squeue", "munged", "mungekey")
MISSING = [b for b in SLURM_BINARIES if not shutil.which(b, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")]

SLURM_CONF = """ClusterName=ci
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket.2
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=1
HealthCheckProgram={root}/health-check
HealthCheckInterval=1
HealthCheckNodeState=ANY
Prolog={root}/prolog
{gres_types}
{plugins}
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 {gres} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _sbin(name):
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def free_port() -> int:
    """A TCP port nothing listens on now: the cluster must not take 6817/6818 from another Slurm on the machine."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scaled(seconds: float) -> float:
    """A wait stretched by the machine's load: on a busy 2-core machine slurmd registers and runs checks late."""
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        load = 1.0
    return seconds * min(max(1.0, load), 4.0)


class Cluster:
    """slurmctld, slurmd and munged on loopback, one node; ``gpus``: the node's Gres (gpu:N, counted in gres.conf),
    of ``gpu_type`` where given; ``plugins``: lines for slurm.conf (JobSubmitPlugins=lua), with ``conf_files``
    copied beside it (job_submit.lua). ``client`` makes another slurm.conf for sbatch, srun and salloc against the
    same controller (with CliFilterPlugins=lua and cli_filter.lua beside it, or none)."""

    def __init__(self, root: Path, gpus: int = 0, gpu_type: str = "", plugins: str = "",
                 conf_files: Sequence[Path] = ()) -> None:
        self.root = root
        self.gpus = gpus
        self.gpu_type = gpu_type
        self.plugins = plugins
        self.conf_files = list(conf_files)
        self.conf = root / "etc" / "slurm.conf"
        self.env = clean_env({"SLURM_CONF": str(self.conf)})
        self.processes = []

    def start(self) -> None:
        for sub in ("etc", "state", "spool", "log", "munge"):
            (self.root / sub).mkdir()
        (self.root / "munge").chmod(0o711)  # munged refuses a socket folder without x for all
        subprocess.run([_sbin("mungekey"), "--create", "--keyfile=%s/munge/munge.key" % self.root], check=True,
                       capture_output=True)
        typed = "%s:" % self.gpu_type if self.gpu_type else ""
        gres = {"gres_types": "GresTypes=gpu" if self.gpus else "",
                "gres": "Gres=gpu:%s%d" % (typed, self.gpus) if self.gpus else ""}
        for path in self.conf_files:
            shutil.copy(str(path), str(self.root / "etc" / path.name))
        self.conf.write_text(SLURM_CONF.format(root=self.root, node=NODE, cpus=os.cpu_count(), ctld_port=free_port(),
                                               slurmd_port=free_port(), plugins=self.plugins, **gres))
        if self.gpus:  # stand-in device files: slurmd counts what gres.conf lists, as on a real GPU node
            devices = self.root / "dev"
            devices.mkdir()
            for index in range(self.gpus):  # character devices like /dev/null (1, 3): slurmd wants devices
                os.mknod(str(devices / ("nvidia%d" % index)), 0o600 | stat.S_IFCHR, os.makedev(1, 3))
            (self.root / "etc" / "gres.conf").write_text("AutoDetect=off\nName=gpu %sFile=%s/nvidia[0-%d]\n" % (
                "Type=%s " % self.gpu_type if self.gpu_type else "", devices, self.gpus - 1))
        self.set_fixture(H200)
        # The health program as Slurm runs it: no PATH, no SLURM_CONF; preflight finds scontrol itself.
        health = self.root / "health-check"
        # Extra options (word-split on purpose) come from the file "extra".
        self.set_extra()
        health.write_text("#!/bin/sh\necho '== run' >> %s/health.log\nexport PREFLIGHT_CACHE_DIR=%s/cache\n"
                          "exec %s -m preflight slurm --nvml-fixture \"$(cat %s/fixture)\" "
                          "--slurm-conf %s $(cat %s/extra) >> %s/health.log 2>&1\n"
                          % (self.root, self.root, sys.executable, self.root, self.conf, self.root, self.root))
        health.chmod(0o755)
        # The same program, run now and answering on its standard streams (for tests that need one run at once).
        now = self.root / "health-now"
        now.write_text("#!/bin/sh\nexec %s -m preflight slurm --nvml-fixture \"$(cat %s/fixture)\" "
                       "--slurm-conf %s $(cat %s/extra) 2>&1\n" % (sys.executable, self.root, self.conf, self.root))
        now.chmod(0o755)
        # The prolog, as slurmd runs it, with an scontrol first in PATH that only records calls: --prolog must
        # make none. Its own fixture and extra options (files prolog-fixture, prolog-extra).
        fake_bin = self.root / "fake-bin"
        fake_bin.mkdir()
        (fake_bin / "scontrol").write_text("#!/bin/sh\necho \"$*\" >> %s/prolog-scontrol-calls\nexit 1\n" % self.root)
        (fake_bin / "scontrol").chmod(0o755)
        (self.root / "prolog-fixture").write_text(H200)
        self.set_prolog_extra()
        prolog = self.root / "prolog"
        prolog.write_text("#!/bin/sh\nexport PATH=%s:/usr/bin:/bin PREFLIGHT_CACHE_DIR=%s/cache\n"
                          "echo \"== job $SLURM_JOB_ID SLURM_JOB_GPUS=$SLURM_JOB_GPUS\" >> %s/prolog.log\n"
                          "%s -m preflight slurm --prolog --nvml-fixture \"$(cat %s/prolog-fixture)\" "
                          "$(cat %s/prolog-extra) >> %s/prolog.log 2>&1\n"
                          "code=$?\necho \"== exit $code\" >> %s/prolog.log\nexit $code\n"
                          % (fake_bin, self.root, self.root, sys.executable, self.root, self.root, self.root,
                             self.root))
        prolog.chmod(0o755)
        munge = self.root / "munge"
        self._spawn([_sbin("munged"), "-F", "--key-file=%s/munge.key" % munge, "--socket=%s/munge.socket.2" % munge,
                     "--pid-file=%s/munged.pid" % munge, "--log-file=%s/munged.log" % munge,
                     "--seed-file=%s/munged.seed" % munge])
        self._wait(lambda: (munge / "munge.socket.2").exists(), 15, "munged socket")
        self._spawn([_sbin("slurmctld"), "-D"])
        self._spawn([_sbin("slurmd"), "-D"])
        self._wait(lambda: self.sinfo_state() in ("idle", "drain", "drng"), 60, "node to register")

    def client(self, name: str, lines: str = "", files: Sequence[Path] = ()) -> Path:
        """A submit host's slurm.conf for the same controller: this cluster's, without its plugin lines, with
        ``lines`` instead, and ``files`` beside it. Returns its path (SLURM_CONF for sbatch)."""
        folder = self.root / "clients" / name
        folder.mkdir(parents=True)
        text = self.conf.read_text()
        if self.plugins:
            text = text.replace(self.plugins, "")
        (folder / "slurm.conf").write_text(text + lines + "\n")
        for path in files:
            shutil.copy(str(path), str(folder / path.name))
        return folder / "slurm.conf"

    def _spawn(self, argv) -> None:
        log = open(str(self.root / "log" / (os.path.basename(argv[0]) + ".out")), "w")
        self.processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                               cwd=NEUTRAL_CWD))

    def stop(self) -> None:
        for process in reversed(self.processes):  # newest first
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)

    def _wait(self, condition, seconds: float, what: str):
        seconds = scaled(seconds)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(0.25)
        raise AssertionError("timed out after %.0f s waiting for %s; health log:\n%s" % (
            seconds, what, self.health_log()[-3000:]))

    def run(self, *argv) -> str:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=30).stdout

    def sinfo_state(self) -> str:
        return self.run("sinfo", "-h", "-n", NODE, "-o", "%t").strip()

    def node(self):
        """(state, reason) of the node, as Slurm says now."""
        info = admission.Scontrol(shutil.which("scontrol"), str(self.conf), 10, {}).node(NODE)
        return info.state, info.reason

    def set_extra(self, *args: str) -> None:
        (self.root / "extra").write_text(" ".join(args))

    def scontrol(self, *args: str) -> str:
        return self.run(shutil.which("scontrol"), *args)

    def oneliner(self) -> str:
        return self.scontrol("show", "node", NODE, "--oneliner")

    def health_now(self) -> str:
        """Run the health program once, now, with no PATH or SLURM_CONF (as slurmd does); return what it said."""
        completed = subprocess.run([str(self.root / "health-now")], capture_output=True, text=True, timeout=60,
                                   env={"SLURMD_NODENAME": NODE, "PREFLIGHT_CACHE_DIR": str(self.root / "cache")},
                                   cwd=NEUTRAL_CWD)
        return completed.stdout

    def health_runs(self, count: int, seconds: float = 90) -> str:
        """Wait until the health program has run ``count`` more times to the end; return what those runs logged."""
        before = self.health_log()
        mark = before.count("== run")
        # Slurm runs one health check at a time: once run N+1 has started, run N has finished.
        self._wait(lambda: self.health_log().count("== run") >= mark + count + 1, seconds, "%d health checks" % count)
        return self.health_log()[len(before):]

    def set_fixture(self, path: str) -> None:
        (self.root / "fixture").write_text(path)

    def set_prolog_extra(self, *args: str) -> None:
        (self.root / "prolog-extra").write_text(" ".join(args))

    def prolog_log(self) -> str:
        path = self.root / "prolog.log"
        return path.read_text() if path.exists() else ""

    def prolog_scontrol_calls(self) -> str:
        path = self.root / "prolog-scontrol-calls"
        return path.read_text() if path.exists() else ""

    def run_job(self, *sbatch_args: str, seconds: float = 60) -> str:
        """Submit a job, wait until it has left the queue; return its id."""
        submitted = self.run("sbatch", *sbatch_args, "-o", str(self.root / "job-%j.out"), "--wrap", "hostname")
        job = re.search(r"Submitted batch job (\d+)", submitted).group(1)
        self._wait(lambda: not self.run("squeue", "-h", "-j", job).strip(), seconds, "job %s to leave the queue" % job)
        return job

    def health_log(self) -> str:
        path = self.root / "health.log"
        return path.read_text() if path.exists() else ""

    def wait_node(self, predicate, seconds: float, what: str):
        """Wait until predicate(state, reason) holds; return (state, reason)."""
        self._wait(lambda: predicate(*self.node()), seconds, what)
        return self.node()


def running_cluster(gpus: int = 0, **more):
    """A started Cluster (a generator for a module-scoped fixture); skips loudly where Slurm cannot run."""
    if MISSING:
        pytest.skip("SLURM IS NOT INSTALLED (missing %s): the real-cluster tests did not run; "
                    "apt-get install slurmctld slurmd slurm-client munge (.ci/run does)" % ", ".join(MISSING))
    if os.geteuid() != 0:
        pytest.skip("the real-cluster tests run slurmd as root, as .ci/run does")
    import tempfile

    # munged wants execute permission for everyone on every folder above its socket; pytest's are 0700.
    root = Path(tempfile.mkdtemp(prefix="preflight-slurm-"))
    root.chmod(0o711)
    running = Cluster(root, gpus, **more)
    try:
        running.start()
        yield running
    finally:
        running.stop()
        shutil.rmtree(str(root), ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    yield from running_cluster()


def test_real_slurm_drain_keeps_jobs_waiting_and_resume_runs_them(cluster):
    # A GPU with ECC errors: preflight, run by slurmd as its health program, drains the node.
    cluster.set_fixture(A100X2)
    state, reason = cluster.wait_node(lambda s, r: admission.is_drained(s) and (r or "").startswith("preflight:"),
                                      60, "preflight to drain the node")
    assert reason.startswith("preflight: gpu.health gpu1 NVIDIA A100-SXM4-40GB: 2 uncorrected ECC")
    assert "preflight: gpu.healt" in cluster.run("sinfo", "-R")  # sinfo -R shows the rule id first
    submitted = cluster.run("sbatch", "--wrap", "hostname", "-o", str(cluster.root / "job-%j.out"))
    job = re.search(r"Submitted batch job (\d+)", submitted).group(1)
    time.sleep(3)
    assert cluster.run("squeue", "-h", "-j", job, "-o", "%T").strip() == "PENDING"

    # The GPU is healthy again: preflight resumes the node and the job runs.
    cluster.set_fixture(H200)
    cluster.wait_node(lambda s, r: not admission.is_drained(s), 60, "preflight to resume the node")
    output = cluster.root / ("job-%s.out" % job)
    cluster._wait(lambda: output.exists() and not cluster.run("squeue", "-h", "-j", job).strip(), 60, "the job to run")
    assert output.read_text().strip() == NODE
    assert "checks pass: resumed %s" % NODE in cluster.health_log()


def test_real_slurm_an_administrators_drain_stays(cluster):
    cluster.run("scontrol", "update", "NodeName=%s" % NODE, "State=DRAIN", "Reason=maintenance: new PSU")
    mark = len(cluster.health_log())
    cluster._wait(lambda: "its reason is not preflight's" in cluster.health_log()[mark:], 60, "a health check to run")
    time.sleep(2)
    state, reason = cluster.node()
    assert admission.is_drained(state) and reason == "maintenance: new PSU"
    cluster.run("scontrol", "update", "NodeName=%s" % NODE, "State=RESUME")


def test_real_slurm_an_administrators_drain_in_preflights_words_stays(cluster):
    cluster.set_fixture(H200)
    cluster.scontrol("update", "NodeName=%s" % NODE, "State=DRAIN", "Reason=preflight: hold for RMA 4411")
    try:
        log = cluster.health_now() + cluster.health_runs(1)
        assert "preflight has no record of setting it here" in log, log
        state, reason = cluster.node()
        assert admission.is_drained(state) and reason == "preflight: hold for RMA 4411"
    finally:
        cluster.scontrol("update", "NodeName=%s" % NODE, "State=RESUME")
        cluster.wait_node(lambda s, r: not admission.out_of_service(s), 60, "the node to come back")


def test_real_slurm_preflights_drain_an_administrator_set_down_stays_down(cluster):
    cluster.set_fixture(A100X2)
    state, reason = cluster.wait_node(lambda s, r: admission.looks_like_ours(r), 60, "preflight to drain the node")
    cluster.scontrol("update", "NodeName=%s" % NODE, "State=DOWN", "Reason=%s" % reason)  # DOWN, our words kept
    try:
        cluster.set_fixture(H200)
        log = cluster.health_now() + cluster.health_runs(1)
        assert "not only drained: someone else set that state" in log, log
        state, kept = cluster.node()
        assert "DOWN" in state and kept == reason
    finally:
        cluster.set_fixture(H200)
        cluster.scontrol("update", "NodeName=%s" % NODE, "State=RESUME")
        cluster.wait_node(lambda s, r: not admission.out_of_service(s), 60, "the node to come back")


def _stamp(oneliner: str) -> str:
    return re.search(r"Reason=.*? \[([^\]]+)\]", oneliner).group(1)


@pytest.mark.parametrize("admin_state", ["DOWN", "FAIL"])
def test_real_slurm_an_administrators_down_or_fail_is_never_taken_over(cluster, admin_state):
    cluster.scontrol("update", "NodeName=%s" % NODE, "State=%s" % admin_state, "Reason=hw-repair:RMA-4411")
    try:
        assert cluster.node()[1] == "hw-repair:RMA-4411"
        stamp = _stamp(cluster.oneliner())
        cluster.set_fixture(A100X2)  # failing checks: must not drain over the administrator's reason
        log = cluster.health_now()
        assert "for another reason, left as it is: hw-repair:RMA-4411" in log, log
        state, reason = cluster.node()
        assert admin_state in state and reason == "hw-repair:RMA-4411" and _stamp(cluster.oneliner()) == stamp
        cluster.set_fixture(H200)  # passing checks: must not resume it either
        log = cluster.health_now()
        assert "its reason is not preflight's (hw-repair:RMA-4411)" in log, log
        state, reason = cluster.node()
        assert admin_state in state and reason == "hw-repair:RMA-4411" and _stamp(cluster.oneliner()) == stamp
    finally:
        cluster.set_fixture(H200)
        cluster.scontrol("update", "NodeName=%s" % NODE, "State=RESUME")
        cluster.wait_node(lambda s, r: not admission.out_of_service(s), 60, "the node to come back")


def test_real_slurm_a_node_comment_does_not_make_preflight_drain_again(cluster):
    cluster.scontrol("update", "NodeName=%s" % NODE, "Comment=rack 4, slot 2")
    try:
        cluster.set_fixture(A100X2)
        state, reason = cluster.wait_node(lambda s, r: admission.looks_like_ours(r), 60, "preflight to drain the node")
        oneliner = cluster.oneliner()
        assert "Comment=rack 4, slot 2" in oneliner and admission.parse_reason(oneliner) == reason
        stamp = _stamp(oneliner)
        log = cluster.health_now() + cluster.health_now()
        assert "is already drained" in log and "drained %s:" % NODE not in log, log
        assert _stamp(cluster.oneliner()) == stamp  # not drained again: the reason's time is unchanged
    finally:
        cluster.set_fixture(H200)
        cluster.wait_node(lambda s, r: not admission.is_drained(s), 60, "preflight to resume the node")
        cluster.scontrol("update", "NodeName=%s" % NODE, "Comment=")


def test_real_slurm_a_probe_timeout_leaves_the_node_alone(cluster, tmp_path):
    hang = tmp_path / "python"
    hang.write_text("#!/bin/sh\nexec sleep 30\n")
    hang.chmod(0o755)
    tmp_path.chmod(0o755)
    # The train profile's Python rules with an interpreter that never answers: the verdict is unknown.
    cluster.set_extra("--profile", "train", "--select", "python", "--python", str(hang), "--timeout", "1")
    try:
        log = cluster.health_now()
        assert "the checks could not finish (python timed out); %s is left as it is" % NODE in log, log
        assert "UNKNOWN python.packages" in log
        state, reason = cluster.node()
        assert not admission.out_of_service(state) and reason is None
        # Also while preflight's own drain is on: unknown neither resumes nor re-drains.
        cluster.set_extra()
        cluster.set_fixture(A100X2)
        state, reason = cluster.wait_node(lambda s, r: admission.looks_like_ours(r), 60, "preflight to drain the node")
        stamp = _stamp(cluster.oneliner())
        cluster.set_fixture(H200)
        cluster.set_extra("--profile", "train", "--select", "python", "--python", str(hang), "--timeout", "1")
        log = cluster.health_now()
        assert "left as it is" in log and cluster.node() == (state, reason) and _stamp(cluster.oneliner()) == stamp
    finally:
        cluster.set_extra()
        cluster.set_fixture(H200)
        cluster.wait_node(lambda s, r: not admission.is_drained(s), 60, "preflight to resume the node")


@pytest.mark.parametrize("line, reason", [
    ("NodeName=n1 State=IDLE+DRAIN Reason=preflight: gpu.health gpu1 ECC [root@2026-11-30T05:30:01] Comment=rack 4, "
     "slot 2 Extra=x", "preflight: gpu.health gpu1 ECC"),
    ("NodeName=n1 State=DOWN Reason=hw-repair:RMA-4411 [slurm@2026-11-30T05:30:01]", "hw-repair:RMA-4411"),
    ("NodeName=n1 State=DOWN Reason=a=b c [x] d [root@2026-11-30T05:30:01] Comment=y", "a=b c [x] d"),
    ("NodeName=n1 State=IDLE+DRAIN Reason=no stamp here Comment=rack 4", "no stamp here"),
    ("NodeName=n1 State=IDLE Partitions=debug", None),
])
def test_reason_parsing_stops_at_the_stamp_or_the_next_field(line, reason):
    assert admission.parse_reason(line) == reason


@pytest.mark.parametrize("state, out", [
    ("IDLE", False), ("MIXED", False), ("ALLOCATED+COMPLETING", False), ("IDLE+DRAIN", True), ("DOWN", True),
    ("DOWN*", True), ("IDLE+FAIL", True), ("IDLE+MAINT+RESERVED", True), ("IDLE+REBOOT_REQUESTED", True),
    ("IDLE+NOT_RESPONDING", True), ("IDLE+POWERED_DOWN", True),
])
def test_out_of_service_states(state, out):
    assert admission.out_of_service(state) is out


@pytest.mark.parametrize("state, reason", [("DOWN", "hw-repair:RMA-4411"), ("IDLE+FAIL", "psu"),
                                           ("IDLE+MAINT", "window"), ("IDLE+DRAIN", "Not responding")])
def test_a_node_another_owns_is_neither_drained_nor_resumed(tmp_path, state, reason):
    (tmp_path / "fail").mkdir()
    assert slurm(fake_scontrol(tmp_path / "fail", state, reason), A100X2).returncode == 1
    (tmp_path / "pass").mkdir()
    passing = slurm(fake_scontrol(tmp_path / "pass", state, reason), H200)
    assert passing.returncode == 0 and "its reason is not preflight's (%s)" % reason in passing.stderr
    assert not [c for c in calls(tmp_path / "fail") + calls(tmp_path / "pass") if c.startswith("update")]


def test_slurm_admits_with_the_node_profile_by_default(tmp_path):
    # The H200 is healthy; preflight's own venv has no torch, which is not the node's business.
    scontrol = fake_scontrol(tmp_path, "IDLE+DRAIN", "preflight: gpu.health gpu0 old problem")
    record_drain("n1", "preflight: gpu.health gpu0 old problem")
    completed = run_cli("slurm", "--nvml-fixture", H200, "--scontrol", str(scontrol), "--node", "n1", "--dry-run")
    assert completed.returncode == 0, completed.stderr
    assert "torch" not in completed.stderr
    assert ("dry run, nothing changed: checks pass: would resume n1 (its reason is preflight: gpu.health gpu0 old "
            "problem)") in completed.stderr
    completed = run_cli("slurm", "--nvml-fixture", H200, "--scontrol", str(scontrol), "--node", "n1")
    assert "checks pass: resumed n1 (its reason was preflight: gpu.health gpu0 old problem)" in completed.stderr
    assert "preflight: preflight:" not in completed.stderr.replace("preflight: checks", "")


@pytest.mark.parametrize("profile", ["train", "inference"])
def test_slurm_job_profiles_need_the_jobs_interpreter(tmp_path, profile):
    scontrol = fake_scontrol(tmp_path)
    completed = run_cli("slurm", "--profile", profile, "--nvml-fixture", H200, "--scontrol", str(scontrol),
                        "--node", "n1")
    assert completed.returncode == 2 and "give the training interpreter with --python PATH" in completed.stderr
    assert not calls(tmp_path)  # scontrol was not even asked
    completed = run_cli("slurm", "--nvml-fixture", H200, "--scontrol", str(scontrol), "--node", "n1",
                        env={"PREFLIGHT_PROFILE": profile})
    assert completed.returncode == 2


def test_dry_run_says_an_administrators_drain_stays_and_no_reason_is_not_none(tmp_path):
    (tmp_path / "a").mkdir()
    admins = fake_scontrol(tmp_path / "a", "IDLE+DRAIN", "maintenance: new PSU")
    completed = slurm(admins, H200, "--dry-run")
    assert "dry run, nothing changed: checks pass; n1 stays IDLE+DRAIN: its reason is not preflight's " \
           "(maintenance: new PSU)" in completed.stderr
    (tmp_path / "b").mkdir()
    idle = fake_scontrol(tmp_path / "b", "IDLE")
    completed = slurm(idle, H200, "--dry-run")
    assert "checks pass; n1 is IDLE" in completed.stderr and "None" not in completed.stderr


# --- the GPUs a node is meant to have ---------------------------------------------------------------

NOT_LOADED = nvml_fixture("driver-not-loaded.json")


@pytest.mark.parametrize("gres, count", [
    ("gpu:8", 8), ("gpu:h100:8", 8), ("gpu:a100:4(S:0-1)", 4), ("gpu:h100:4,gpu:a100:2", 6),
    ("gpu:a100:2(S:0),gpu:a100:2(S:1)", 4), ("gpu:tesla:2(S:0-1,3)", 2), ("gpu:0", 0), ("gpu", 1),
    ("gpu:h100", 1), ("shard:8,gpu:2", 2), ("shard:8", None), ("(null)", None), ("", None), ("mps:400", None),
    ("gpu:1g.10gb:7", 7),
])
def test_gres_gpu_count(gres, count):
    assert admission.gres_gpu_count(gres) == count


def test_a_node_missing_a_gpu_drains_with_the_expected_count(tmp_path):
    scontrol = fake_scontrol(tmp_path, gres="gpu:h200:8(S:0-1)")
    completed = slurm(scontrol, H200)
    assert completed.returncode == 1, completed.stderr
    assert "expected 8 GPUs (Slurm Gres), found 1" in completed.stderr
    drains = [c for c in calls(tmp_path) if c.startswith("update")]
    assert len(drains) == 1 and "Reason=preflight: gpu.expected_count expected 8 GPUs (Slurm Gres), found 1" \
        in drains[0], drains
    # The same node with the count it is meant to have passes; --expect-gpus overrides the Gres.
    assert slurm(fake_scontrol(tmp_path / "one", gres="gpu:1"), H200).returncode == 0
    override = slurm(fake_scontrol(tmp_path / "two", gres="gpu:8"), H200, "--expect-gpus", "1")
    assert override.returncode == 0, override.stderr


@pytest.mark.parametrize("fixture", [NO_LIBRARY, NOT_LOADED])
@pytest.mark.parametrize("gres", ["(null)", "gpu:0", "shard:4"])
def test_a_cpu_only_node_is_not_drained(tmp_path, fixture, gres):
    scontrol = fake_scontrol(tmp_path, gres=gres)
    completed = slurm(scontrol, fixture)
    assert completed.returncode == 0, completed.stderr
    assert ("n1 is not a GPU node (no GPU in its Slurm Gres and no NVIDIA driver): GPU checks skipped"
            in completed.stderr)
    assert not [c for c in calls(tmp_path) if c.startswith("update")]
    # Drained earlier by preflight for the missing driver (an older default): resumed.
    drained = fake_scontrol(tmp_path / "old", "IDLE+DRAIN", "preflight: nvml.init NVML library not found")
    record_drain("n1", "preflight: nvml.init NVML library not found")
    assert slurm(drained, fixture).returncode == 0
    assert "State=RESUME" in calls(tmp_path / "old")[-1]


@pytest.mark.parametrize("fixture", [NO_LIBRARY, NOT_LOADED])
def test_a_gpu_node_without_its_driver_still_drains(tmp_path, fixture):
    completed = slurm(fake_scontrol(tmp_path, gres="gpu:4"), fixture)
    assert completed.returncode == 1
    assert "not a GPU node" not in completed.stderr
    assert [c for c in calls(tmp_path) if "State=DRAIN" in c and "nvml.init" in c]


def test_gpus_without_gres_are_still_checked(tmp_path):
    # GPUs the site does not schedule through Slurm: no count to compare, but a broken GPU still drains.
    ok = slurm(fake_scontrol(tmp_path / "ok"), H200)
    assert ok.returncode == 0 and "not a GPU node" not in ok.stderr
    assert slurm(fake_scontrol(tmp_path / "bad"), A100X2).returncode == 1


def test_real_slurm_a_cpu_only_node_stays_up(cluster):
    # No GPU in the node's Gres and no NVIDIA driver: the cluster-wide health program must leave it in service.
    cluster.set_fixture(NO_LIBRARY)
    try:
        said = cluster.health_now()
        assert "is not a GPU node (no GPU in its Slurm Gres and no NVIDIA driver): GPU checks skipped" in said, said
        assert "checks pass" in said
        log = cluster.health_runs(2)
        assert "not a GPU node" in log and "drain" not in log.lower(), log
        state, reason = cluster.node()
        assert "DRAIN" not in state and reason is None
    finally:
        cluster.set_fixture(H200)


def test_real_slurm_default_profile_keeps_a_healthy_node_without_torch(cluster):
    # The health program gives no --profile: node is the default, and preflight's own venv has no torch.
    import importlib.util

    assert importlib.util.find_spec("torch") is None, "this test means something only without torch installed"
    cluster.set_fixture(H200)
    said = cluster.health_now()
    assert "checks pass" in said and "torch" not in said, said
    state, reason = cluster.node()
    assert "DRAIN" not in state and reason is None


# --- a rollout: a broken configuration is never a verdict, reports are kept, the prolog calls no Slurm command -----

TYPO_ELSEWHERE = """[defaults]
profile = "node"

[[match]]
hosts = ["gpu-a*"]
set = ["gpu.memroy.min=80GB"]
"""


def test_real_slurm_a_typo_for_other_hosts_never_drains_and_is_caught_by_validate(cluster, tmp_path):
    config = tmp_path / "site.toml"
    config.write_text(TYPO_ELSEWHERE)
    where = "%s:6: [[match]] 1: set: gpu.memroy.min=80GB: unknown rule id 'gpu.memroy'" % config
    # Where the file is written: config validate and check both name it.
    validated = run_cli("config", "validate", str(config))
    assert validated.returncode == 2 and where in validated.stdout, validated.stdout
    checked = run_cli("check", "--config", str(config), "--nvml-fixture", H200)
    assert checked.returncode == 2 and where in checked.stderr, checked.stderr
    cluster.set_extra("--config", str(config))
    cluster.set_prolog_extra("--config", str(config))
    try:
        # A healthy node stays in service; the health program says loudly why admission is not running.
        cluster.set_fixture(H200)
        log = cluster.health_runs(2)
        assert "UNKNOWN: the site configuration or rules cannot be used" in log and where in log, log
        assert "DRAIN" not in cluster.node()[0]
        # A faulty node is left as it was (no drain on a verdict preflight could not reach).
        cluster.set_fixture(A100X2)
        log = cluster.health_runs(2)
        assert where in log and "drain" not in log.lower().replace("admission is not running", ""), log
        state, reason = cluster.node()
        assert "DRAIN" not in state and reason is None, (state, reason)
        # A job starts: the prolog exits 0 and logs; Slurm never drains the node for "Prolog error".
        cluster.set_fixture(H200)
        job = cluster.run_job()
        assert (cluster.root / ("job-%s.out" % job)).read_text().strip() == NODE
        prolog = cluster.prolog_log()
        assert "prolog job %s: UNKNOWN: the site configuration or rules cannot be used" % job in prolog, prolog
        assert where in prolog and "== exit 0" in prolog, prolog
        state, reason = cluster.node()
        assert "DRAIN" not in state and reason is None, (state, reason)
    finally:
        cluster.set_extra()
        cluster.set_prolog_extra()
        cluster.set_fixture(H200)
    assert not cluster.prolog_scontrol_calls()


def test_real_slurm_reports_fill_the_folder_fleet_reads(cluster, tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    cluster.set_fixture(H200)
    cluster.set_extra("--report-dir", str(reports))
    try:
        cluster.health_runs(1)
    finally:
        cluster.set_extra()
    # health_runs returns once the next run has started, and that run read --report-dir too: let it finish its
    # write (its temporary file is renamed at the end) before the folder is looked at.
    cluster.health_runs(1)
    kept = reports / ("%s.json" % NODE)
    assert kept.exists(), list(reports.iterdir())
    import json

    report = json.loads(kept.read_text())
    assert report["schema"] == "preflight.report/1" and report["ok"] and report["collected_at"]
    assert not [p for p in reports.iterdir() if p.name != kept.name]  # no temporary left behind
    fleet = run_cli("fleet", str(reports), "--format", "json")
    assert fleet.returncode == 0, fleet.stderr
    nodes = json.loads(fleet.stdout)
    assert NODE in json.dumps(nodes), fleet.stdout[:2000]


def test_real_slurm_prolog_calls_no_scontrol_and_says_which_gpus(cluster):
    cluster.set_fixture(H200)
    cluster.wait_node(lambda s, r: not admission.out_of_service(s), 60, "the node to be in service")
    job = cluster.run_job()
    prolog = cluster.prolog_log()
    assert "prolog job %s: no GPU of 1 (neither SLURM_JOB_GPUS nor CUDA_VISIBLE_DEVICES is set: the job has no " \
           "GPU): OK" % job in prolog, prolog
    assert not cluster.prolog_scontrol_calls(), cluster.prolog_scontrol_calls()
