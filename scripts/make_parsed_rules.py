#!/usr/bin/env python3
"""Write rules/parsed.json: every shipped TOML file (rules, fixes, failures, capacity, smoke and knowledge files),
parsed, with the length and CRC-32 of the bytes it was parsed from.

preflight reads a shipped file's tables from here when the file's bytes are the ones parsed, so a fresh container
starts as fast as a warm workstation (preflight.knowledge.shipped). Run it after editing any file under rules/; a test
(tests/test_shipped.py) fails while the two differ.

    python scripts/make_parsed_rules.py [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
TARGET = os.path.join(ROOT, "rules", "parsed.json")


def rendered() -> str:
    """The file's text: one line per parsed file, so that a diff names the files that changed."""
    from preflight.knowledge.shipped import parse_all

    parsed = parse_all()
    lines = ["%s: %s" % (json.dumps(name), json.dumps(entry, ensure_ascii=False, allow_nan=False))
             for name, entry in parsed["files"].items()]
    return '{"format": %d, "files": {\n%s\n}}\n' % (parsed["format"], ",\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when rules/parsed.json is stale; write nothing")
    args = parser.parse_args()
    text = rendered()
    current = open(TARGET, encoding="utf-8").read() if os.path.exists(TARGET) else None
    if current == text:
        print("rules/parsed.json is up to date")
        return 0
    if args.check:
        print("rules/parsed.json is stale: run python scripts/make_parsed_rules.py")
        return 1
    with open(TARGET, "w", encoding="utf-8") as out:
        out.write(text)
    print("wrote rules/parsed.json (%d bytes)" % len(text.encode("utf-8")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
