#!/usr/bin/env python3
"""Write preflight/schemas/*.schema.json: JSON Schemas (draft 2020-12) of every JSON document preflight writes.

Each schema is defined next to the code that writes its document (commands/schema.py's DOCUMENTS says where;
facts/1 comes from the snapshot's shape, preflight/probes/shape.py). A test keeps the shipped files equal to
this script's output and validates real outputs of every command against them.

    python scripts/make_schemas.py [--check]
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Dict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
FOLDER = os.path.join(ROOT, "preflight", "schemas")


def rendered() -> Dict[str, str]:
    from preflight.commands.schema import DOCUMENTS, generated

    return {"%s-1.schema.json" % name: generated(name) for name in DOCUMENTS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the shipped files differ; write nothing")
    args = parser.parse_args()
    stale = []
    os.makedirs(FOLDER, exist_ok=True)
    for name, text in rendered().items():
        path = os.path.join(FOLDER, name)
        current = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if current != text:
            stale.append(name)
            if not args.check:
                with open(path, "w", encoding="utf-8") as out:
                    out.write(text)
    print(("stale: %s" % ", ".join(stale)) if stale else "schemas up to date")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
