"""Discoverability: every command's summary and examples, shell completion, and the man page's stand-in."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

import click
import pytest
from conftest import REPO, clean_env, run_cli

from preflight.cli import COMMANDS, cli


def parse(argv):
    """Parse a command line with the real CLI without running it (a UsageError when it is wrong)."""
    assert argv[0] == "preflight", argv
    command, rest = cli, argv[1:]
    while isinstance(command, click.Group):
        name, rest = rest[0], rest[1:]
        command = command.get_command(None, name)
    with command.make_context(argv[1], list(rest)) as context:
        return context.params


def test_every_command_has_a_whole_summary_and_examples_that_parse():
    assert set(COMMANDS) == set(cli.list_commands(None))
    listing = run_cli("--help").stdout
    for name, entry in COMMANDS.items():
        summary, examples = entry.summary, entry.examples
        assert summary.endswith(".") and len(summary) <= 80 and "..." not in summary, \
            "%s: the summary must be one whole sentence of at most 80 characters: %r" % (name, summary)
        assert 2 <= len(examples) <= 3, "%s: give two or three examples in preflight.commands.COMMANDS, not %d" % (name, len(examples))
        for example in examples:
            try:
                parse(shlex.split(example))
            except click.ClickException as exc:
                raise AssertionError("%s: the example %r does not parse: %s" % (name, example, exc.format_message()))
        text = run_cli(name, "--help").stdout
        assert "Examples:" in text and examples[0] in text, name
    assert "..." not in listing.split("Commands:")[1]  # no summary cut mid-sentence


def _completions(words, env=None):
    line = clean_env(env)
    line.update(COMP_WORDS=" ".join(words), COMP_CWORD=str(len(words) - 1), _PREFLIGHT_COMPLETE="bash_complete")
    done = subprocess.run([sys.executable, "-m", "preflight"], capture_output=True, text=True, env=line,
                          timeout=60)
    return [entry.split(",", 1)[1] for entry in done.stdout.splitlines()]


def test_completion_scripts_and_values():
    script = run_cli("completion", "bash").stdout
    loaded = subprocess.run(["bash", "-c", 'eval "$1" && complete -p preflight', "-", script], capture_output=True,
                            text=True, timeout=60)
    assert loaded.returncode == 0 and "_preflight_completion" in loaded.stdout, loaded.stderr
    for shell in ("zsh", "fish"):
        assert "_PREFLIGHT_COMPLETE" in run_cli("completion", shell).stdout
    assert "fleet" in _completions(["preflight", "fl"])
    assert _completions(["preflight", "explain", "gpu.he"]) == ["gpu.health"]
    assert {"xid", "xid.node", "xid.watch"} <= set(_completions(["preflight", "check", "--select", "xid"]))
    assert "gelan-c" in _completions(["preflight", "plan", "--workload", "gel"])
    assert "h100-nvl" in _completions(["preflight", "plan", "--workload", "gelan-c", "--gpu", "h1"])
    assert "cuda.oom" in _completions(["preflight", "explain", "cuda.o"])


@pytest.mark.skipif(shutil.which("bash") is None, reason="SKIPPED LOUDLY: no bash here")
def test_bash_completes_through_the_loaded_script():
    script = run_cli("completion", "bash").stdout
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    probe = ('eval "$1"; COMP_WORDS=(preflight explain gpu.he); COMP_CWORD=2; _preflight_completion preflight; '
             'printf "%s\\n" "${COMPREPLY[@]}"')
    done = subprocess.run(["bash", "-c", probe, "-", script], capture_output=True, text=True, timeout=60, env=env)
    if "command not found" in done.stderr:
        pytest.skip("SKIPPED LOUDLY: the preflight console script is not on PATH in this environment")
    assert done.stdout.split() == ["gpu.health"], done.stderr


def test_the_readme_says_why_there_is_no_man_page():
    readme = (REPO / "README.md").read_text()
    assert "man page" in readme


def _interactive_bash_completes(tmp_path, typed: str, timeout: float = 20.0) -> str:
    """Type ``typed`` and a TAB into a real interactive bash that loaded 'preflight completion bash'; return the
    line as bash shows it after completing."""
    import pty
    import select
    import time

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("SKIPPED LOUDLY: no bash here to complete in")
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir(exist_ok=True)
    wrapper = bin_folder / "preflight"  # the completion script runs `preflight` as a program, as an install does
    wrapper.write_text('#!/bin/sh\nexec %s -m preflight "$@"\n' % sys.executable)
    wrapper.chmod(0o755)
    env = clean_env({"PATH": "%s:%s" % (bin_folder, os.environ.get("PATH", "")), "PS1": "READY$ ", "TERM": "dumb",
                     "INPUTRC": "/dev/null", "PYTHONPATH": str(REPO)})
    pid, terminal = pty.fork()
    if pid == 0:  # the child: an interactive bash in tmp_path
        os.chdir(str(tmp_path))
        os.execve(bash, [bash, "--norc", "--noprofile", "-i"], env)
    seen = b""

    def read_until(marker: bytes, seconds: float) -> bytes:
        nonlocal seen
        deadline = time.monotonic() + seconds
        while marker not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([terminal], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(terminal, 65536)
                except OSError:
                    break
        return seen

    try:
        os.write(terminal, b'eval "$(preflight completion bash)"; echo LOADED\n')
        read_until(b"LOADED\r\n", timeout)
        seen = b""
        os.write(terminal, typed.encode() + b"\t")
        time.sleep(0.3)
        read_until(b"\x07NEVER", 3.0)  # whatever bash writes back within a few seconds
        return seen.decode("utf-8", "replace")
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(terminal)


@pytest.mark.parametrize("typed, completed", [
    ("preflight diagnose tra", "preflight diagnose train.log"),
    ("preflight check --config sit", "preflight check --config site.toml"),
    ("preflight check --nvml-fixture recor", "preflight check --nvml-fixture recording.json"),
    ("preflight fleet repor", "preflight fleet reports/"),
    ("preflight config validate sit", "preflight config validate site.toml"),
    ("preflight slurm --report-dir repor", "preflight slurm --report-dir reports/"),
])
@pytest.mark.slow
def test_paths_complete_in_a_real_interactive_bash(tmp_path, typed, completed):
    (tmp_path / "train.log").write_text("x\n")
    (tmp_path / "site.toml").write_text("[defaults]\n")
    (tmp_path / "recording.json").write_text("{}\n")
    (tmp_path / "reports").mkdir()
    shown = _interactive_bash_completes(tmp_path, typed)
    assert completed in shown, repr(shown)


def test_a_mistyped_command_names_the_nearest():
    completed = run_cli("chek")
    assert completed.returncode == 2, completed
    assert "No such command 'chek'. Did you mean 'check'" in completed.stderr, completed.stderr
    completed = run_cli("zzzzzz")
    assert completed.returncode == 2 and "Did you mean" not in completed.stderr and "Commands: check," in completed.stderr
