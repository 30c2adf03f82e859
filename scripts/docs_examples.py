#!/usr/bin/env python3
"""The examples in README.md and docs/*.md, run: every preflight command they show, and every output they claim.

In a ```console block, a line ``$ preflight ...`` is a command and the lines after it, up to the next ``$`` line,
are its output. Every such command is parsed by the real command line (tests/test_docs.py); a command followed by
output is run here, from the repository's root, at 100 columns, and its output must be what the block shows:
compared word by word (wrapping may differ with the host's name), with ``...`` standing for any lines left out, and
this host's short name shown as ``gpu01``. An output block checked by a test of its own instead is preceded by
``<!-- output checked by tests/FILE::TEST -->``.

    python scripts/docs_examples.py            # rewrite every output block that has no "..." from the real CLI
    python scripts/docs_examples.py --check    # exit 1 and show what differs
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
from typing import List, NamedTuple, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = "gpu01"  # what the docs show for this machine's name
MARKER = re.compile(r"<!-- output checked by (tests/[\w/.]+::\w+) -->")


class Example(NamedTuple):
    path: str  # the document, relative to the repository
    line: int  # the command's line in it (1-based)
    command: str  # as written after "$ ", comment included
    output: List[str]  # the lines shown after it ([] when none)
    checked_by: Optional[str]  # a test that checks this output instead


def documents() -> List[str]:
    docs = os.path.join(ROOT, "docs")
    pages = sorted(os.path.join("docs", name) for name in os.listdir(docs) if name.endswith(".md"))
    return ["README.md"] + [page for page in pages if not page.endswith("rules.md")]  # rules.md is generated


def examples(path: str) -> List[Example]:
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    found: List[Example] = []
    number = 0
    while number < len(lines):
        fence = lines[number].strip()
        if fence.startswith("```") and fence[3:].strip() in ("console", "bash", "sh", "shell"):
            checked_by = None
            previous = lines[number - 1].strip() if number else ""
            marker = MARKER.search(previous)
            if marker:
                checked_by = marker.group(1)
            body_start = number + 1
            end = body_start
            while end < len(lines) and not lines[end].strip().startswith("```"):
                end += 1
            console = fence[3:].strip() == "console"
            index = body_start
            while index < end:
                text = lines[index]
                command = text[2:] if console and text.startswith("$ ") else (text if not console else None)
                if command is not None and command.strip().startswith("preflight "):
                    output = []
                    following = index + 1
                    while console and following < end and not lines[following].startswith("$ "):
                        output.append(lines[following])
                        following += 1
                    found.append(Example(path, index + 1, command.strip(), output, checked_by))
                    index = following if console else index + 1
                    continue
                index += 1
            number = end + 1
            continue
        number += 1
    return found


_INLINE = re.compile(r"`(preflight [a-z][^`]*)`")
_SYNOPSIS = ("...", "|", "[", "<", "NAME", "ID", "FILE")  # a shape of a command, not one to parse


def inline_commands(path: str) -> List[Example]:
    """Whole command lines written inline (`preflight check --profile node`), not synopses."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    found = []
    for number, line in enumerate(lines, 1):
        for match in _INLINE.finditer(line):
            command = match.group(1)
            if len(command.split()) > 2 and not any(mark in command for mark in _SYNOPSIS):  # more than a name
                found.append(Example(path, number, command, [], None))
    return found


_SHELL = (">", ">>", "|", "&&", ";", "2>&1", "<")


def argv(example: Example) -> List[str]:
    """The command's words, up to a redirection or pipe, its trailing comment left out."""
    words = shlex.split(example.command, comments=True)
    cut = next((index for index, word in enumerate(words) if word in _SHELL), len(words))
    return words[:cut]


def run(example: Example) -> List[str]:
    """The command's output as preflight prints it here, this host's name shown as the docs show it."""
    words = argv(example)
    with tempfile.TemporaryDirectory(prefix="preflight-docs-") as cache:
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("CUDA_", "NVIDIA_", "PREFLIGHT_", "SLURM_", "CONDA_"))}
        env.update(COLUMNS="100", NO_COLOR="1", PREFLIGHT_CACHE_DIR=cache, PYTHONPATH=ROOT)
        completed = subprocess.run([sys.executable, "-m", "preflight"] + words[1:], capture_output=True, text=True,
                                   cwd=ROOT, env=env, timeout=120)
    text = completed.stdout + (completed.stderr if not completed.stdout else "")
    host = socket.gethostname().split(".")[0]
    if host:
        text = re.sub(r"(?<![\w.-])%s(?![\w.-])" % re.escape(host), HOST, text)
    return text.rstrip("\n").split("\n")


def matches(shown: List[str], printed: List[str]) -> bool:
    """Word by word; a line "..." in what is shown stands for any words."""
    pattern = []
    for line in shown:
        if line.strip() == "...":
            pattern.append(None)
        else:
            pattern.extend(line.split())
    words = " ".join(printed).split()
    return _match(pattern, words)


def _match(pattern, words) -> bool:
    # Words before the first wildcard must be at the start, the rest in order: a greedy scan per segment.
    segments: List[List[str]] = [[]]
    for item in pattern:
        if item is None:
            segments.append([])
        else:
            segments[-1].append(item)
    position = 0
    for number, segment in enumerate(segments):
        if not segment:
            continue
        if number == 0:
            if words[:len(segment)] != segment:
                return False
            position = len(segment)
            continue
        found = _find(words, segment, position)
        if found < 0:
            return False
        position = found + len(segment)
    ends_open = not segments[-1]  # the pattern ends with "...": anything may follow
    return ends_open or position == len(words)


def _find(words, segment, start) -> int:
    for index in range(start, len(words) - len(segment) + 1):
        if words[index:index + len(segment)] == segment:
            return index
    return -1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="say what differs; change nothing (exit 1 if any)")
    args = parser.parse_args()
    differing = 0
    for path in documents():
        text = open(os.path.join(ROOT, path), encoding="utf-8").read()
        lines = text.split("\n")
        for example in reversed(examples(path)):  # from the end, so that earlier line numbers stay right
            if not example.output or example.checked_by:
                continue
            printed = run(example)
            if matches(example.output, printed):
                continue
            differing += 1
            if args.check or any(line.strip() == "..." for line in example.output):
                print("%s:%d: $ %s\n  shows:   %s\n  printed: %s\n" % (
                    path, example.line, example.command, " | ".join(example.output[:6]), " | ".join(printed[:6])))
                continue
            start = example.line  # the output starts on the line after the command (0-based index = line)
            lines[start:start + len(example.output)] = printed
        if not args.check:
            with open(os.path.join(ROOT, path), "w", encoding="utf-8") as out:
                out.write("\n".join(lines))
    print("%d example output(s) differ" % differing if differing else "every example output is what preflight prints")
    return 1 if differing and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
