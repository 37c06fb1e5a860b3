"""``trainguard rule``: a code's docs entry from the package, and the list of every code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainguard import cli
from trainguard.catalog import CATALOG, lookup, page

DOCS = Path(__file__).resolve().parents[1] / "docs" / "rules"


@pytest.mark.parametrize("query", ["TG201", "tg201", "graph-kept-across-steps"])
def test_rule_prints_the_docs_entry(capsys: pytest.CaptureFixture[str], query: str) -> None:
    assert cli.main(["rule", query]) == 0
    out = capsys.readouterr().out
    assert out == (DOCS / "TG201.md").read_text()
    assert out.startswith("# TG201 graph-kept-across-steps\n") and "## Use instead" in out


def test_rule_json_has_the_fields_the_url_and_the_page(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["rule", "TG404", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    entry = lookup("TG404")
    assert (data["code"], data["name"], data["layers"]) == ("TG404", entry.name, ["lint", "run"])
    assert data["helpUri"] == entry.help_uri and data["helpUri"].endswith("/rules/TG404.md")
    assert data["page"] == page("TG404")


def test_rule_all_lists_codes_names_and_layers(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["rule", "--all"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert [row[0] for row in rows] == list(CATALOG)
    by_code = {row[0]: row for row in rows}
    assert by_code["TG201"] == ["TG201", "graph-kept-across-steps", "lint,", "run"]
    assert by_code["TG202"] == ["TG202", "backward-twice", "run"]  # runtime only
    assert by_code["TG505"] == ["TG505", "best-on-train-metric", "lint"]  # static only


def test_rule_all_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["rule", "--all", "--format", "json"]) == 0
    rules = json.loads(capsys.readouterr().out)["rules"]
    assert [r["code"] for r in rules] == list(CATALOG)
    assert all(r["helpUri"].endswith(f"/rules/{r['code']}.md") for r in rules)


def test_every_code_has_a_page_and_a_url() -> None:
    for code, entry in CATALOG.items():
        assert page(code).startswith(f"# {code} {entry.name}\n")
        assert entry.help_uri and entry.help_uri.startswith("https://")
