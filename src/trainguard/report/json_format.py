"""JSON: ``{"findings": [...]}``, each finding in the catalogue's shape (see ``findings.py``)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from trainguard.findings import Finding


def render_json(findings: Sequence[Finding]) -> str:
    return json.dumps({"findings": [f.to_dict() for f in findings]}, indent=2)
