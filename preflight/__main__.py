"""The ``preflight`` command (its console script) and ``python -m preflight``."""

from preflight.cli import main

if __name__ == "__main__":
    main()
