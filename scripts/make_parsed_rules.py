#!/usr/bin/env python3
"""Write rules/parsed/: the parse of every shipped TOML file (rules, fixes, failures, capacity, smoke and knowledge
files), one JSON file per TOML file, with the length and CRC-32 of the bytes it was parsed from.

preflight reads a shipped file's tables from its parse when the file's bytes are the ones parsed, so a fresh
container starts as fast as a warm workstation (preflight.knowledge.shipped). Run it after editing any file under
rules/; a test (tests/test_shipped.py) fails while the two differ.

    python scripts/make_parsed_rules.py [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
RULES = os.path.join(ROOT, "rules")


def rendered() -> dict:
    """Each parse's path under rules/ -> its text."""
    from preflight.knowledge import shipped

    return {shipped.parse_path(name): json.dumps(entry, ensure_ascii=False, allow_nan=False) + "\n"
            for name, entry in shipped.parse_all()["files"].items()}


def present() -> dict:
    from preflight.knowledge import shipped

    found = {}
    for root, _, names in os.walk(os.path.join(RULES, shipped.PARSED)):
        for name in names:
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as handle:
                found[os.path.relpath(path, RULES)] = handle.read()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when rules/parsed/ is stale; write nothing")
    args = parser.parse_args()
    wanted, found = rendered(), present()
    stale = sorted(path for path in set(wanted) | set(found) if wanted.get(path) != found.get(path))
    if not stale:
        print("rules/parsed/ is up to date")
        return 0
    if args.check:
        print("rules/parsed/ is stale (%s): run python scripts/make_parsed_rules.py" % ", ".join(stale))
        return 1
    for path in stale:
        target = os.path.join(RULES, path)
        if path not in wanted:
            os.remove(target)
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as out:
            out.write(wanted[path])
    print("wrote rules/parsed/ (%d of %d files changed)" % (len(stale), len(wanted)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
