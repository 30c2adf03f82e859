#!/usr/bin/env python3
"""Follow a command's options value through the code: which modules it passes through, and how often the path
climbs back up a layer (docs/architecture.md's table).

Runs the real command line in this process under sys.settrace and records every call that receives a
CheckOptions (as an argument or in its locals at entry). The numbers are the design review's measure of how many
places one option has to be threaded through.

    python scripts/trace_options.py check --profile node --nvml-fixture h200
"""

from __future__ import annotations

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def layer_table(doc: str):
    rows = []
    for line in open(doc, encoding="utf-8"):
        match = re.match(r"^\|\s*(\d+)\s*\|([^|]*)\|", line)
        if match:
            rows.append((int(match.group(1)), re.findall(r"`(preflight/[^`]*)`", match.group(2))))
    return rows


def layer_of(relative: str, table) -> int:
    best = (0, -1)
    for layer, paths in table:
        for entry in paths:
            if (relative == entry or (entry.endswith("/") and relative.startswith(entry))) and len(entry) > best[1]:
                best = (layer, len(entry))
    return best[0]


def main(argv) -> int:
    sys.path.insert(0, os.getcwd())
    import preflight
    from preflight.commands.options import CheckOptions

    package = os.path.dirname(os.path.abspath(preflight.__file__))
    table = layer_table(os.path.join(ROOT, "docs", "architecture.md"))
    path: list = []  # (module file, function) in call order, for calls that receive the options
    values: list = []  # calls that receive one of the options' own values (a tuple of rule paths, the workload)
    carried: dict = {}  # id -> object: every CheckOptions seen and its non-trivial field values

    def remember(options) -> None:
        carried[id(options)] = options
        for value in options:
            if isinstance(value, (tuple, frozenset)) and value or hasattr(value, "_fields"):
                carried[id(value)] = value

    def tracer(frame, event, arg):
        if event == "return":
            if isinstance(arg, CheckOptions):  # a new options value (the site configuration merged in)
                remember(arg)
            elif hasattr(arg, "options") and isinstance(getattr(arg, "options", None), CheckOptions):
                remember(arg.options)
            return None
        if event != "call":
            return None
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(package):
            return None
        where = (os.path.relpath(filename, os.path.dirname(package)), frame.f_code.co_name)
        locals_ = list(frame.f_locals.values())
        for value in locals_:
            if isinstance(value, CheckOptions):
                remember(value)
        if any(isinstance(value, CheckOptions) for value in locals_):
            path.append(where)
        elif any(id(value) in carried and carried[id(value)] is value for value in locals_):
            values.append(where)
        return tracer  # to see what it returns

    from preflight.cli import main as cli_main

    sys.settrace(tracer)
    try:
        cli_main(argv)
    except SystemExit:
        pass
    finally:
        sys.settrace(None)
    modules = []
    for module, _ in path:
        if module not in modules:
            modules.append(module)
    climbs = sum(1 for (a, _), (b, _) in zip(path, path[1:])
                 if layer_of(b, table) < layer_of(a, table) and layer_of(b, table))
    sys.stderr.write("options passed through %d modules (%d calls, %d climbs back up a layer):\n  %s\n"
                     % (len(modules), len(path), climbs, "\n  ".join(modules)))
    reached = []
    for module, _ in path + values:
        if module not in reached:
            reached.append(module)
    both = path + values
    climbs = sum(1 for (a, _), (b, _) in zip(both, both[1:])
                 if layer_of(b, table) < layer_of(a, table) and layer_of(b, table))
    sys.stderr.write("options or one of its values passed through %d modules:\n  %s\n"
                     % (len(reached), "\n  ".join(reached)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
