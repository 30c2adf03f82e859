"""The ``preflight`` command (its console script) and ``python -m preflight``.

Start-up allocates tens of thousands of objects (modules, classes, click's options) and no garbage: Python's
cyclic collector would walk them again and again while they load. It is off while the command line loads, and
what loaded is then frozen (never walked again) before the collector is turned back on for the command itself,
so a long ``serve`` or a ``fleet`` over thousands of files collects as usual.
"""

import gc


def main() -> None:
    gc.disable()
    from preflight.cli import main as run

    gc.freeze()
    gc.enable()
    run()


if __name__ == "__main__":
    main()
