#!/usr/bin/env python3
"""Build dist/preflight.pyz: preflight and its dependencies in one file, for nodes without a virtual environment.

Made with shiv (https://github.com/linkedin/shiv, installed into a throwaway venv at a pinned version). Run it
with the oldest Python the file must serve (3.8): pip picks versions of the dependencies that still run there,
and they run on newer Pythons too (psutil ships one wheel for every CPython 3, its abi3 build). tomli is always
included, for Pythons before 3.11. On its first run the file unpacks itself under ~/.shiv (SHIV_ROOT to move
it), which psutil's compiled module needs; later runs reuse that.

    python3.8 scripts/build_zipapp.py [--output dist/preflight.pyz]
    python3 dist/preflight.pyz check --profile node

The build is reproducible: SOURCE_DATE_EPOCH fixes the timestamps (shiv --reproducible), so the same sources and
dependency versions give the same file.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import venv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIV = "shiv==1.0.8"
OLDEST = (3, 8)  # the oldest Python the file claims to serve (its shebang runs any python3)

# The file's own __main__.py, in place of shiv's: shiv's bootstrap unpacks the file under SHIV_ROOT (default
# ~/.shiv) before preflight runs, and where that folder cannot be made (a read-only or missing HOME, as for
# service users) it dies with a traceback and exit 1, which means "checks failed". Say what and how, exit 2.
MAIN = """# -*- coding: utf-8 -*-
import sys

try:
    import _bootstrap

    _bootstrap.bootstrap()
except OSError as exc:  # preflight itself never lets an OSError out: this is the unpacking
    import os

    root = os.environ.get("SHIV_ROOT") or os.path.join(os.path.expanduser("~"), ".shiv")
    sys.stderr.write("preflight: error: the single-file preflight cannot unpack itself under %s: %s\\n"
                     "  hint: set SHIV_ROOT to a folder this user can write, e.g. "
                     "SHIV_ROOT=/tmp/preflight-$(id -u) %s %s ...\\n" % (root, exc.strerror or exc,
                                                             os.path.basename(sys.executable), sys.argv[0]))
    sys.exit(2)
"""


def replace_main(path: str) -> None:
    """Rewrite the zipapp with MAIN as its __main__.py, keeping the shebang, every other entry and the dates."""
    import zipfile

    with open(path, "rb") as handle:
        shebang = handle.readline()
    temporary = path + ".tmp"
    with zipfile.ZipFile(path) as source, open(temporary, "wb") as out:
        out.write(shebang)
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as target:
            for info in source.infolist():
                data = MAIN.encode("utf-8") if info.filename == "__main__.py" else source.read(info)
                target.writestr(info, data)
    os.chmod(temporary, 0o755)
    os.replace(temporary, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=os.path.join(ROOT, "dist", "preflight.pyz"))
    args = parser.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="preflight-zipapp-") as work:
        builder = os.path.join(work, "venv")
        venv.create(builder, with_pip=True)
        python = os.path.join(builder, "bin", "python")
        quiet = ["--quiet", "--disable-pip-version-check"]
        subprocess.run([python, "-m", "pip", "install"] + quiet + [SHIV], check=True)
        env = dict(os.environ, SOURCE_DATE_EPOCH=os.environ.get("SOURCE_DATE_EPOCH", "1764460800"))
        subprocess.run([python, "-m", "shiv", "--reproducible", "--compressed", "--output-file", args.output,
                        "--entry-point", "preflight.__main__:main", "--python", "/usr/bin/env python3",
                        ROOT, "tomli>=1.1", "--disable-pip-version-check", "--quiet"],
                       check=True, env=env, cwd=work)
    replace_main(args.output)
    if sys.version_info[:2] > OLDEST:
        print("warning: built with Python %d.%d: pip picked the dependencies for it, which may not run on Python "
              "%d.%d to %d.%d; build with python%d.%d for a file every supported Python runs"
              % (sys.version_info[:2] + OLDEST + (sys.version_info[0], sys.version_info[1] - 1) + OLDEST),
              file=sys.stderr)
    size = os.path.getsize(args.output) / 1e6
    print("built %s (%.1f MB) with Python %d.%d" % (args.output, size, sys.version_info[0], sys.version_info[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
