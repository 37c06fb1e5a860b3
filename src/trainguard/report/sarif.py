"""SARIF 2.1.0 for code scanning (GitHub, GitLab, VS Code's SARIF viewer).

One run, the tool ``trainguard`` with one rule per code seen: its name, summary, why, a
``helpUri`` to the published docs entry and the entry itself as ``help.markdown``. Each result has
the code as ``ruleId``, the message and fix, and a physical location with 1-based line and column
in Unicode code points (``columnKind: unicodeCodePoints``).

A finding in a notebook cell keeps the .ipynb file as its artifact, with the region where that
line of the cell is stored in the file (see :mod:`trainguard.report.ipynb`), and adds the cell:

- ``logicalLocations: [{"name": "cell 4", "fullyQualifiedName": "nb.ipynb[cell 4]"}]``
- location ``properties``: ``cell`` (numbered from 1 as the cells appear, markdown cells
  included), ``cellLine``/``cellColumn`` (and ``cellEndLine``/``cellEndColumn``): the place
  within the cell's source, as the text output prints it (``nb.ipynb[cell 4]:2:9``).

When the notebook cannot be read back (standard input, a file changed since), the region is left
out rather than guessed; the cell properties stay.

Spec: https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from trainguard.catalog import Entry, lookup, page
from trainguard.findings import Finding
from trainguard.report.ipynb import NotebookLines
from trainguard.urls import project_urls

_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render_sarif(findings: Sequence[Finding], *, tool_version: str = "") -> str:
    codes = sorted({f.code for f in findings})
    index = {code: i for i, code in enumerate(codes)}
    notebooks: dict[str, NotebookLines | None] = {}
    results = []
    for f in findings:
        result: dict[str, Any] = {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": _level(f.code),
            "message": {"text": f"{f.message} (fix: {f.fix})"},
            "locations": [_location(f, notebooks)],
        }
        results.append(result)
    driver: dict[str, Any] = {"name": "trainguard", "version": tool_version or "0",
                              "rules": [_rule(lookup(code)) for code in codes]}
    homepage = project_urls().get("Homepage")
    if homepage:
        driver["informationUri"] = homepage
    doc = {
        "$schema": _SCHEMA,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "columnKind": "unicodeCodePoints",
                  "results": results}],
    }
    return json.dumps(doc, indent=2)


def _level(code: str) -> str:
    return "warning" if code == "TG002" else "error"


def _rule(entry: Entry) -> dict[str, Any]:
    where = f"`trainguard rule {entry.code}`"
    if entry.help_uri:
        where += f" or {entry.help_uri}"
    help_: dict[str, str] = {"text": f"{entry.why} Fix: {entry.fix}. Docs: {where}"}
    try:
        help_["markdown"] = page(entry.code)
    except FileNotFoundError:  # an install without its rule pages: the text still says where
        pass
    rule: dict[str, Any] = {
        "id": entry.code,
        "name": entry.name,
        "shortDescription": {"text": entry.summary},
        "fullDescription": {"text": entry.why},
        "help": help_,
        "defaultConfiguration": {"level": _level(entry.code)},
    }
    if entry.help_uri:
        rule["helpUri"] = entry.help_uri
    return rule


def _location(f: Finding, notebooks: dict[str, NotebookLines | None]) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": f.path.replace("\\", "/")}}
    if f.cell is None:
        physical["region"] = _region(f.line, f.col, f.end_line, f.end_col)
        return {"physicalLocation": physical}
    if f.path not in notebooks:
        notebooks[f.path] = NotebookLines.read(f.path) if f.path != "-" else None
    lines = notebooks[f.path]
    start = lines.position(cell=f.cell, line=f.line, col=f.col) if lines else None
    if start is not None and lines is not None:
        end = None
        if f.end_line is not None:
            end = lines.position(cell=f.cell, line=f.end_line, col=f.end_col or 1)
        physical["region"] = _region(*start, end[0] if end else None,
                                     end[1] if end and f.end_col is not None else None)
    properties: dict[str, int] = {"cell": f.cell, "cellLine": f.line, "cellColumn": f.col}
    if f.end_line is not None:
        properties["cellEndLine"] = f.end_line
    if f.end_col is not None:
        properties["cellEndColumn"] = f.end_col
    return {
        "physicalLocation": physical,
        "logicalLocations": [{"name": f"cell {f.cell}",
                              "fullyQualifiedName": f"{f.path}[cell {f.cell}]"}],
        "properties": properties,
    }


def _region(line: int, col: int, end_line: int | None, end_col: int | None) -> dict[str, int]:
    region = {"startLine": line, "startColumn": col}
    if end_line is not None:
        region["endLine"] = end_line
    if end_col is not None:
        region["endColumn"] = end_col
    return region
