"""Where the data that ships with preflight lives: the default rules, fixes, failure catalog and knowledge files."""

from __future__ import annotations

import os

from preflight.errors import PreflightError


def data_dir() -> str:
    """rules/ of a source tree, or the installed copy (the package preflight.default_rules)."""
    package = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(package, "default_rules")
    if os.path.isdir(installed):
        return installed
    checkout = os.path.join(os.path.dirname(package), "rules")  # running from a source tree
    if os.path.isdir(checkout):
        return checkout
    raise PreflightError("the default rules are missing from this installation (%s)" % installed,
                         "reinstall preflight: pip install --force-reinstall preflight")
