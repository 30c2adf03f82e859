"""The ``preflight`` command (its console script) and ``python -m preflight``.

Start-up allocates tens of thousands of objects (modules, classes, click's options) and no garbage: Python's
cyclic collector would walk them again and again while they load. It is off while the command line loads, and
what loaded is then frozen (never walked again). A command ``cli.py`` declares short (a check: well under a
second, bounded input) runs to its end without the collector, and leaves as soon as its output is flushed:
tearing the interpreter down (freeing every module and object, one by one) would take longer than some checks,
and a short command leaves nothing behind that needs it (its files are written and closed, its helper processes
killed, its probe threads are daemons). The others (``serve`` runs for days, ``fleet`` and ``diagnose`` read
unbounded input, ``exec`` may retry for minutes) turn the collector back on and leave the usual way, with what is
left frozen: the collection Python makes on its way out would only walk objects about to be freed.
"""

import gc
import os
import sys


def main() -> None:
    gc.disable()
    from preflight.cli import main as run, runs_short

    gc.freeze()
    short = runs_short(sys.argv[1:])
    if not short:
        gc.enable()
    try:
        run()
    except SystemExit as leaving:
        if short:
            _leave_now(leaving.code)
        raise
    finally:
        gc.freeze()


def _leave_now(code) -> None:
    """Exit with ``code`` (as ``sys.exit`` reads it) once standard output and error are flushed, without tearing
    the interpreter down; a flush that fails exits 120, as Python's own exit does."""
    if code is None:
        code = 0
    elif not isinstance(code, int):
        sys.stderr.write("%s\n" % (code,))
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            code = 120
    os._exit(code)


if __name__ == "__main__":
    main()
