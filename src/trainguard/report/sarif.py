"""SARIF 2.1.0 for code scanning (GitHub, GitLab, VS Code's SARIF viewer).

One run, the tool ``trainguard`` with one rule per code seen; each result has the code as
``ruleId``, the message and fix, and a physical location with 1-based line and column.
Spec: https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from trainguard.catalog import lookup
from trainguard.findings import Finding

_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render_sarif(findings: Sequence[Finding], *, tool_version: str = "") -> str:
    codes = sorted({f.code for f in findings})
    rules = []
    for code in codes:
        entry = lookup(code)
        rules.append({
            "id": code,
            "name": entry.name,
            "shortDescription": {"text": entry.summary},
            "fullDescription": {"text": entry.why},
            "help": {"text": f"{entry.why} Fix: {entry.fix} Docs: {entry.docs}"},
            "defaultConfiguration": {"level": "error" if code != "TG002" else "warning"},
        })
    index = {code: i for i, code in enumerate(codes)}
    results = []
    for f in findings:
        region = {"startLine": f.line, "startColumn": f.col}
        if f.end_line is not None:
            region["endLine"] = f.end_line
        if f.end_col is not None:
            region["endColumn"] = f.end_col
        result = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": "error" if f.code != "TG002" else "warning",
            "message": {"text": f"{f.message} (fix: {f.fix})"},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": f.path.replace("\\", "/")},
                "region": region,
            }}],
        }
        if f.cell is not None:
            result["properties"] = {"cell": f.cell}
        results.append(result)
    doc = {
        "$schema": _SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "trainguard", "version": tool_version or "0",
                                "rules": rules}},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2)
