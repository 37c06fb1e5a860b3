"""The shared core: catalogue, findings, selection and suppression."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainguard.catalog import CATALOG, lookup
from trainguard.config import Config, is_suppressed, load_config, parse_code_list
from trainguard.errors import UsageError
from trainguard.findings import Finding

SHARED_CATALOG = Path(__file__).resolve().parents[2] / "shared" / "CATALOG.md"


def test_codes_and_names_are_unique_and_well_formed():
    names = [e.name for e in CATALOG.values()]
    assert len(names) == len(set(names))
    for code, entry in CATALOG.items():
        assert re.fullmatch(r"TG\d{3}", code)
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", entry.name)
        assert entry.static or entry.runtime


@pytest.mark.skipif(not SHARED_CATALOG.exists(), reason="shared catalogue not beside checkout")
def test_catalog_matches_the_shared_catalogue():
    rows = re.findall(r"^\| (TG\d{3}) \| ([a-z0-9-]+) \| .* \| ([SR ]+) \|$",
                      SHARED_CATALOG.read_text(), re.M)
    assert rows, "no rows parsed from CATALOG.md"
    for code, name, layers in rows:
        entry = CATALOG[code]
        assert entry.name == name
        assert entry.static == ("S" in layers), code
        assert entry.runtime == ("R" in layers), code
    assert {r[0] for r in rows} == set(CATALOG)


def test_every_code_has_a_docs_entry():
    docs = Path(__file__).resolve().parents[1] / "docs" / "rules"
    missing = [c for c in CATALOG if not (docs / f"{c}.md").is_file()]
    assert not missing, f"docs/rules entries missing for {missing}"
    for code, entry in CATALOG.items():
        text = (docs / f"{code}.md").read_text()
        assert text.startswith(f"# {code} {entry.name}"), code


def test_finding_text_and_json_shape():
    f = Finding.make("TG201", layer="lint", path="train.py", line=12, col=9,
                     message="`total += loss` keeps every step's graph")
    assert f.format() == (
        "train.py:12:9: TG201 graph-kept-across-steps: `total += loss` keeps every step's graph "
        "(fix: accumulate loss.item() or loss.detach() instead of the tensor)"
    )
    d = f.to_dict()
    assert d["name"] == "graph-kept-across-steps" and d["docs"] == "trainguard rule TG201"
    assert d["helpUri"].endswith("/docs/rules/TG201.md")
    assert "cell" not in d and d["count"] == 1


def test_lookup_by_name():
    assert lookup("backward-twice").code == "TG202"
    with pytest.raises(KeyError):
        lookup("TG999")


@pytest.mark.parametrize("line,code,expected", [
    ("x = y  # noqa: TG201", "TG201", True),
    ("x = y  # noqa: TG201, TG206", "TG206", True),
    ("x = y  # noqa: TG2", "TG206", True),
    ("x = y  # noqa: TG201", "TG206", False),
    ("x = y  # noqa", "TG201", False),
    ("x = y  # trainguard: ignore[TG201]", "TG201", True),
    ("x = y  # trainguard: ignore[TG101,TG201]", "TG201", True),
    ("x = y  # trainguard: ignore", "TG404", True),
    ("x = y  # trainguard: ignore[TG101]", "TG201", False),
    ("x = y", "TG201", False),
])
def test_suppression_comments(line, code, expected):
    assert is_suppressed(code, line) is expected


def test_select_ignore_prefixes_and_per_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.trainguard]\nselect = ["TG2", "TG3"]\nignore = ["TG206"]\n'
        'exclude = ["vendor"]\nper-file-ignores = { "tests/*" = ["TG3"] }\n'
    )
    cfg = load_config(tmp_path)
    assert cfg.wants("TG201") and not cfg.wants("TG206") and not cfg.wants("TG101")
    assert cfg.wants("TG301", str(tmp_path / "train.py"))
    assert not cfg.wants("TG301", str(tmp_path / "tests" / "test_x.py"))
    assert cfg.excluded(tmp_path / "vendor" / "a.py")
    flags = cfg.with_overrides(select="TG1")
    assert flags.wants("TG101") and not flags.wants("TG201")


@pytest.mark.parametrize("toml,needle", [
    ('[tool.trainguard]\nselect = ["XX9"]\n', "matches no trainguard code"),
    ('[tool.trainguard]\nselct = ["TG2"]\n', "unknown key(s)"),
    ('[tool.trainguard\n', "cannot read"),
])
def test_bad_config_names_the_file(tmp_path, toml, needle):
    (tmp_path / "pyproject.toml").write_text(toml)
    with pytest.raises(UsageError) as err:
        load_config(tmp_path)
    assert needle in str(err.value) and "pyproject.toml" in str(err.value)


def test_parse_code_list_rejects_unknown():
    assert parse_code_list("tg2, TG301", where="--select") == ["TG2", "TG301"]
    with pytest.raises(UsageError, match="--select"):
        parse_code_list("E501", where="--select")


def test_default_config_wants_everything():
    assert all(Config().wants(code) for code in CATALOG)
