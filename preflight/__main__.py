"""The ``preflight`` command (its console script) and ``python -m preflight``.

Start-up allocates tens of thousands of objects (modules, classes, click's options) and no garbage: Python's
cyclic collector would walk them again and again while they load. It is off while the command line loads, and
what loaded is then frozen (never walked again). A command ``cli.py`` declares short (a check: well under a
second, bounded input) runs to its end without the collector; the others (``serve`` runs for days, ``fleet``
and ``diagnose`` read unbounded input, ``exec`` may retry for minutes) turn it back on. When the command ends, what is left is
frozen too: the collection Python makes on its way out would only walk objects about to be freed.
"""

import gc
import sys


def main() -> None:
    gc.disable()
    from preflight.cli import main as run, runs_short

    gc.freeze()
    if not runs_short(sys.argv[1:]):
        gc.enable()
    try:
        run()
    finally:
        gc.freeze()


if __name__ == "__main__":
    main()
