"""Run every rule over one source: parse, check, suppress, select.

A file that does not parse is one TG001 finding; a rule that raises is one TG002 finding and the
other rules go on.
"""

from __future__ import annotations

import ast
import re
import traceback
from dataclasses import dataclass, field

from trainguard.config import Config, is_suppressed
from trainguard.findings import Finding
from trainguard.lint.project import cached_script, remember_script
from trainguard.lint.rules import Edit, Hit, all_rules
from trainguard.lint.script import Script
from trainguard.lint.source import Source

__all__ = ["LintResult", "lint_source", "lint_text", "is_test_file"]

_TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test|conftest)\.py$")


def is_test_file(path: str) -> bool:
    """pytest's file names (``test_*.py``, ``*_test.py``, ``conftest.py``): unit tests build
    models, seed, save and load on purpose, and are not training runs, so the rules about a run
    (``SKIP_IN_TESTS``) leave them alone; the rules about code (TG105, TG206, TG401, TG406) still
    apply."""
    return bool(_TEST_FILE.search(path.replace("\\", "/")))


@dataclass(slots=True)
class LintResult:
    """Findings of one source, and the automatic fixes that go with them."""

    source: Source
    findings: list[Finding] = field(default_factory=list)
    fixes: list[tuple[Finding, list[Edit], bool]] = field(default_factory=list)


def lint_text(text: str, *, path: str = "<string>", config: Config | None = None) -> list[Finding]:
    """Lint Python source text and return its findings, sorted by place.

    Example::

        from trainguard.lint import lint_text
        for f in lint_text(open("train.py").read(), path="train.py"):
            print(f.format())
    """
    return lint_source(Source(path=path, text=text), config=config).findings


def lint_source(source: Source, *, config: Config | None = None) -> LintResult:
    config = config or Config()
    result = LintResult(source)
    script = cached_script(source.path, source.text)
    if script is None:
        try:
            tree = ast.parse(source.text, filename=source.path)
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None) or 1
            col = getattr(exc, "offset", None) or 1
            msg = getattr(exc, "msg", None) or str(exc)
            _add(result, config, "TG001", line, col, f"cannot parse: {msg}", None, None, None)
            return result
        script = Script(source=source.text, path=source.path, tree=tree, cells=source.cells)
        remember_script(source.path, script)
    seen: set[tuple[str, int, int]] = set()
    in_tests = is_test_file(source.path)
    for code, rule in all_rules().items():
        if not config.wants(code, source.path):
            continue
        if in_tests and getattr(rule, "SKIP_IN_TESTS", False):
            continue
        try:
            hits = list(rule.check(script))
        except Exception as exc:  # a bug in one rule must not hide the others
            where = traceback.extract_tb(exc.__traceback__)[-1]
            _add(result, config, "TG002", 1, 1,
                 f"rule {code} failed on this file: {type(exc).__name__}: {exc} "
                 f"(at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})", None, None, None)
            continue
        for hit in hits:
            line = getattr(hit.node, "lineno", 1)
            col = getattr(hit.node, "col_offset", 0) + 1
            if (code, line, col) in seen:
                continue
            seen.add((code, line, col))
            _add(result, config, code, line, col, hit.message, hit.fix, hit, hit.node)
    result.findings.sort(key=Finding.sort_key)
    return result


def _add(result: LintResult, config: Config, code: str, line: int, col: int, message: str,
         fix: str | None, hit: Hit | None, node: ast.AST | None) -> None:
    source = result.source
    if not config.wants(code, source.path):
        return
    lines = source.text.splitlines()
    if 1 <= line <= len(lines) and is_suppressed(code, lines[line - 1]):
        return
    cell, shown_line = source.locate(line)
    end_line = getattr(node, "end_lineno", None)
    end_col = getattr(node, "end_col_offset", None)
    if end_line is not None and cell is not None:
        end_line = source.locate(end_line)[1]
    finding = Finding.make(code, layer="lint", path=source.path, line=shown_line, col=col,
                           message=message, fix=fix, cell=cell, end_line=end_line,
                           end_col=None if end_col is None else end_col + 1)
    result.findings.append(finding)
    if hit is not None and hit.edits:
        result.fixes.append((finding, hit.edits, hit.safe))
