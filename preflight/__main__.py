"""The ``preflight`` command (its console script) and ``python -m preflight``.

Start-up allocates tens of thousands of objects (modules, classes, click's options) and no garbage: Python's
cyclic collector would walk them again and again while they load. It is off while the command line loads, and
what loaded is then frozen (never walked again) before the collector is turned back on for the command itself,
so a long ``serve`` or a ``fleet`` over thousands of files collects as usual. When the command ends, what is
left is frozen too: the collection Python makes on its way out would only walk objects about to be freed.
"""

import gc


def main() -> None:
    gc.disable()
    from preflight.cli import main as run

    gc.freeze()
    gc.enable()
    try:
        run()
    finally:
        gc.freeze()


if __name__ == "__main__":
    main()
