"""Shared test helpers: the real CLI in a subprocess, NVML fixtures, and throwaway Python environments."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
NVML_FIXTURES = REPO / "preflight" / "recordings"  # the NVML recordings ship with preflight (--nvml-fixture NAME)
SHARED_NVML = REPO.parent / "shared" / "fixtures" / "nvml"
# Subprocesses start here, not in the repository, so that `python -m preflight`
# runs the installed package (a wheel in CI, an editable install when developing).
NEUTRAL_CWD = str(REPO / "tests")

# Variables that change what preflight sees; tests start without them.
_CLEARED = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_VERSION", "NVIDIA_DISABLE_REQUIRE",
            "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_VISIBLE_DEVICES", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
            "CONDA_SHLVL", "PREFLIGHT_NVML_FIXTURE", "NO_COLOR", "PYTHONPATH", "VIRTUAL_ENV")


# Fixtures that start something real and slow (a Slurm cluster, torch in a worker): every test using one is `slow`.
SLOW_FIXTURES = {"cluster", "torch_python"}


@pytest.fixture(scope="session")
def torch_python():
    """An interpreter with torch (CI: a venv with torch==2.13.0's CPU build, PREFLIGHT_TEST_TORCH_PYTHON)."""
    path = os.environ.get("PREFLIGHT_TEST_TORCH_PYTHON")
    if not path:
        pytest.skip("SKIPPED LOUDLY: PREFLIGHT_TEST_TORCH_PYTHON is not set (.ci/run sets it to a venv with "
                    "torch==2.13.0), so the active test is not run for real here")
    probe = subprocess.run([path, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True,
                           timeout=120)
    if probe.returncode != 0:
        pytest.skip("SKIPPED LOUDLY: %s cannot import torch: %s" % (path, probe.stderr.strip()[-300:]))
    return path


def pytest_collection_modifyitems(items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def clean_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED and not k.startswith("NVIDIA_REQUIRE_")}
    env.update(extra or {})
    return env


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch, tmp_path_factory):
    """No test reads the developer's CUDA/conda variables or writes to ~/.cache."""
    for name in list(os.environ):
        if name in _CLEARED or name.startswith("NVIDIA_REQUIRE_"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PREFLIGHT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


def run_cli(*args: str, env: Optional[Dict[str, str]] = None, timeout: float = 120,
            stdin: Optional[str] = None, subprocess_only: bool = False) -> subprocess.CompletedProcess:
    """Run the real command line (``preflight.cli.main``) with this environment, stdin and working folder.

    In this process by default (about 20 ms instead of 300); in a fresh process
    where only a process tells the truth: ``exec`` (it replaces the process),
    a changed PYTHONPATH (read at interpreter start), or ``subprocess_only``
    (signals, file descriptors, console scripts, deadlines on stuck threads).
    """
    full_env = clean_env(env)
    full_env.setdefault("PREFLIGHT_CACHE_DIR", os.environ.get("PREFLIGHT_CACHE_DIR", ""))
    if subprocess_only or (args and args[0] == "exec") or "PYTHONPATH" in (env or {}):
        return subprocess.run([sys.executable, "-m", "preflight", *args], capture_output=True, text=True,
                              env=full_env, timeout=timeout, cwd=NEUTRAL_CWD, input=stdin)
    return _run_in_process(list(args), full_env, stdin)


def _exit_without_leaving(code: int) -> None:
    from preflight import cli

    cli._stop_helpers()
    sys.exit(code)


def _run_in_process(args, env: Dict[str, str], stdin: Optional[str]) -> subprocess.CompletedProcess:
    import contextlib
    import io
    import signal

    from preflight import cli
    from preflight.probes import process

    out, err = io.StringIO(), io.StringIO()
    fake_stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode("utf-8")), encoding="utf-8")
    saved_environ, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
    saved_handlers = {name: signal.getsignal(getattr(signal, name)) for name in ("SIGTERM", "SIGHUP")}
    code = 0
    os.environ.clear()
    os.environ.update(env)
    os.chdir(NEUTRAL_CWD)
    sys.stdin = fake_stdin
    real_exit = cli._exit
    cli._exit = _exit_without_leaving  # never os._exit the test run when a probe thread is stuck
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.main(args)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        cli._exit = real_exit
        os.environ.clear()
        os.environ.update(saved_environ)
        os.chdir(saved_cwd)
        sys.stdin = saved_stdin
        for name, handler in saved_handlers.items():
            signal.signal(getattr(signal, name), handler)
        process.reopen()
    return subprocess.CompletedProcess(["preflight", *args], code, out.getvalue(), err.getvalue())


def run_json(*args: str, env: Optional[Dict[str, str]] = None, expect_code: Optional[int] = None):
    completed = run_cli(*args, "--format", "json", env=env)
    assert completed.returncode in (0, 1), completed.stderr
    if expect_code is not None:
        assert completed.returncode == expect_code, completed.stdout + completed.stderr
    return json.loads(completed.stdout)


def by_id(report) -> Dict[str, list]:
    results: Dict[str, list] = {}
    for result in report["results"]:
        results.setdefault(result["id"], []).append(result)
    return results


def status_of(report, rule_id: str, subject: Optional[str] = None) -> str:
    found = [r for r in report["results"] if r["id"] == rule_id and (subject is None or r["subject"] == subject)]
    assert len(found) == 1, (rule_id, subject, found)
    return found[0]["status"]


def preflight_command_problems(command: str) -> list:
    """Why each ``preflight ...`` part of a printed command would not parse with the real command line (an unknown
    command or option, a bad value); empty when every part parses. Other programs' parts are not looked at."""
    import shlex

    import click

    from preflight.cli import cli

    found = []
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)  # quotes kept whole; |, ;, && apart
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as exc:
        return ["%r: %s" % (command, exc)]
    segments, words = [], []
    for token in tokens + [";"]:
        if token and all(character in "();<>|&" for character in token):
            segments.append(words)
            words = []
        else:
            words.append(token)
    for words in segments:
        if not words or words[0] != "preflight":
            continue
        current, rest = cli, words[1:]
        try:
            while isinstance(current, click.Group):
                current, rest = current.get_command(None, rest[0]), rest[1:]
                if current is None:
                    raise click.UsageError("no such command")
            with current.make_context(words[1], list(rest)):
                pass
        except (click.ClickException, IndexError) as exc:
            found.append("%r does not parse: %s" % (" ".join(words), exc))
    return found


def nvml_fixture(name: str) -> str:
    return str(NVML_FIXTURES / name)


def load_nvml_fixture(name: str) -> dict:
    return json.loads((NVML_FIXTURES / name).read_text())


def write_fixture(tmp_path: Path, base: str, change: Callable[[dict], None], name: str = "fixture.json") -> str:
    """A synthetic fixture: a recorded one with some answers changed."""
    data = copy.deepcopy(load_nvml_fixture(base))
    change(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def ok(value) -> dict:
    return {"ok": value}


class FakeEnvironment:
    """A real interpreter environment (``venv --without-pip``) with fake packages installed.

    Packages get real dist-info metadata, so importlib.metadata and find_spec
    see them as pip-installed. ``conda`` makes the prefix look like a conda
    environment (its name is the folder's name; ``base`` adds condabin/).
    """

    def __init__(self, root: Path, conda: Optional[str] = None, base_python: str = sys.executable) -> None:
        self.root = root
        subprocess.run([base_python, "-m", "venv", "--without-pip", str(root)], check=True)
        self.python = str(root / "bin" / "python")
        self.site = Path(subprocess.run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        capture_output=True, text=True, check=True).stdout.strip())
        if conda:
            (root / "conda-meta").mkdir()
            if conda == "base":
                (root / "condabin").mkdir()

    def add_package(self, dist: str, version: str, import_name: Optional[str] = None, code: str = "",
                    requires: Sequence[str] = ()) -> None:
        module = import_name or dist.lower().replace("-", "_")
        folder = self.site / module
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").write_text(code)
        info = self.site / ("%s-%s.dist-info" % (dist.replace("-", "_"), version))
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n%s\nA description.\n" % (
            dist, version, "".join("Requires-Dist: %s\n" % requirement for requirement in requires)))
        (info / "RECORD").write_text("")

    def add_companion(self, name: str, version: str, requires_torch: Optional[str]) -> None:
        """torchvision or torchaudio as their wheels install them: version.py with the build in the local version
        (and a CUDA check made at import, not a literal), the torch requirement in the metadata as pip writes it."""
        requires = ["numpy"] + (["torch (%s)" % requires_torch] if requires_torch else [])
        self.add_package(name, version.split("+")[0], name, requires=requires)
        (self.site / name / "version.py").write_text(
            "__version__ = %r\ngit_version = '8fb87713a24951e639c494b0f2a8a81b5f8e33a6'\n"
            "from %s.extension import _check_cuda_version\nif _check_cuda_version() > 0:\n"
            "    cuda = _check_cuda_version()\n" % (version, name))

    def add_torch(self, version: str = "2.11.0+cu130", cuda: Optional[str] = "13.0",
                  arch_flags: str = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120", hip: Optional[str] = None,
                  import_log: Optional[Path] = None) -> None:
        """A torch whose version.py looks like the real one and whose _C answers getArchFlags.

        Importing it appends the importing PID to ``import_log``, and sleeps
        FAKE_TORCH_IMPORT_SLEEP seconds when that is set (a hung import).
        """
        code = textwrap.dedent("""
            import os, time
            if os.environ.get("FAKE_TORCH_IMPORT_SLEEP"):
                time.sleep(float(os.environ["FAKE_TORCH_IMPORT_SLEEP"]))
            if %(log)r:
                with open(%(log)r, "a") as log:
                    log.write("%%d\\n" %% os.getpid())
            class _C:
                @staticmethod
                def _cuda_getArchFlags():
                    return %(flags)r
        """) % {"log": str(import_log) if import_log else "", "flags": arch_flags}
        self.add_package("torch", version.split("+")[0], "torch", code)
        torch = self.site / "torch"
        (torch / "version.py").write_text(textwrap.dedent("""\
            from typing import Optional

            __all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']
            __version__ = %r
            debug = False
            cuda: Optional[str] = %r
            git_version = '70d99e998b4955e0049d13a98d77ae1b14db1f45'
            hip: Optional[str] = %r
        """) % (version, cuda, hip))
        (torch / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\0" * 64)

    def add_yolov9_packages(self, skip=()) -> None:
        """Everything the train profile's python.packages rule asks for."""
        packages = [("torchvision", "0.26.0", None), ("numpy", "2.3.5", None),
                    ("opencv-python-headless", "5.0.0.93", "cv2"), ("PyYAML", "6.0.2", "yaml"),
                    ("Pillow", "9.5.0", "PIL"), ("scipy", "1.15.0", None), ("matplotlib", "3.10.0", None),
                    ("pandas", "2.3.0", None), ("seaborn", "0.13.2", None), ("tqdm", "4.67.0", None),
                    ("requests", "2.32.0", None), ("psutil", "7.2.2", None), ("setuptools", "80.0.0", "pkg_resources"),
                    ("tensorboard", "2.19.0", None), ("thop", "0.1.1", None), ("ipython", "8.30.0", "IPython")]
        for dist, version, module in packages:
            if dist not in skip and (module or dist) not in skip:
                self.add_package(dist, version, module)


@pytest.fixture
def fake_env(tmp_path):
    def make(name: str = "venv", conda: Optional[str] = None, base_python: str = sys.executable) -> FakeEnvironment:
        return FakeEnvironment(tmp_path / name, conda=conda, base_python=base_python)
    return make


def python_with_current_torch_wheels(torch=(2, 14)) -> str:
    """An interpreter that torch ``torch`` (and 2.13, the tests' other release) publishes wheels for, by the wheel
    data: the test runner's own, or another python3.X on PATH. A test whose expected command names those releases
    needs one; under an older Python the right answer is another command (none of their wheels exist for it),
    which other tests and the fix loop check."""
    from preflight.knowledge import torch_wheels

    releases = torch_wheels.catalog().releases
    served = set(releases[torch].pythons) & set(releases[(2, 13)].pythons)
    if tuple(sys.version_info[:2]) in served:
        return sys.executable
    for version in sorted(served, reverse=True):
        found = shutil.which("python%d.%d" % version)
        probe = "import sys, venv; assert sys.version_info[:2] == %r" % (version,)
        if found and subprocess.run([found, "-c", probe], capture_output=True).returncode == 0:
            return found
    pytest.skip("SKIPPED LOUDLY: no Python that torch %d.%d has wheels for (%s) on PATH" % (
        torch + (", ".join("%d.%d" % v for v in sorted(served)),)))


def driver_install_command():
    """The driver install command a fix prints on this machine: it follows the host's distribution."""
    try:
        with open("/etc/os-release") as handle:
            text = handle.read().lower()
    except OSError:
        text = ""
    ids = " ".join(line for line in text.splitlines() if line.startswith(("id=", "id_like=", "name=")))
    if any(name in ids for name in ("rhel", "rocky", "alma", "centos", "fedora")):
        return "sudo yum install -y cuda-drivers"
    if "debian" in ids and "ubuntu" not in ids:
        return "sudo apt-get install -y cuda-drivers"
    return "sudo ubuntu-drivers install"


class ScriptedHttp:
    """A real TCP server on loopback that answers every connection with ``answer(connection)``: for clients that
    must cope with servers that trickle, lie or send what is not HTTP. Use as a context manager."""

    def __init__(self, answer: Callable) -> None:
        import socket
        import threading

        self.answer = answer
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.url = "http://127.0.0.1:%d" % self.listener.getsockname()[1]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import threading

        while not self.stopping.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(connection,), daemon=True).start()

    def _one(self, connection) -> None:
        with connection:
            try:
                connection.settimeout(5)
                connection.recv(65536)
                self.answer(connection, self.stopping)
            except OSError:
                pass  # the client gave up, as it should

    def __enter__(self) -> "ScriptedHttp":
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.listener.close()
