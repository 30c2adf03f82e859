"""The ``preflight`` command (its console script) and ``python -m preflight``.

Start-up allocates tens of thousands of objects (modules, classes, click's options) and no garbage: Python's
cyclic collector would walk them again and again while they load. It is off while the command line loads, and
what loaded is then frozen (never walked again). A short command over bounded input (a check: well under a
second) runs to its end without the collector; the others (``serve`` runs for days, ``fleet`` and ``diagnose``
read unbounded input, ``exec`` may retry for minutes) turn it back on. When the command ends, what is left is
frozen too: the collection Python makes on its way out would only walk objects about to be freed.
"""

import gc
import sys

# Commands that finish quickly over input of a bounded size: they need no cyclic collection.
SHORT_COMMANDS = ("check", "facts", "rules", "explain", "plan", "schema", "completion", "config", "slurm")


def command_name(argv) -> str:
    """The command a command line names: its first word that is not an option (the group takes no values)."""
    return next((word for word in argv if not word.startswith("-")), "")


def main() -> None:
    gc.disable()
    from preflight.cli import main as run

    gc.freeze()
    if command_name(sys.argv[1:]) not in SHORT_COMMANDS:
        gc.enable()
    try:
        run()
    finally:
        gc.freeze()


if __name__ == "__main__":
    main()
