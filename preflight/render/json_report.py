"""The report as JSON: the documented ``preflight.report/1`` contract."""

from __future__ import annotations

import json

from preflight.report import Report


def render(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2)
