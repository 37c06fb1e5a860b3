"""`.pre-commit-hooks.yaml` and the pre-commit config in docs/lint.md stay in step with the CLI."""

from __future__ import annotations

import re
from pathlib import Path

from trainguard import cli

ROOT = Path(__file__).resolve().parents[2]


def _hooks() -> dict[str, dict[str, str]]:
    """id -> {key: value} for the flat `key: value` lines of .pre-commit-hooks.yaml."""
    hooks: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in (ROOT / ".pre-commit-hooks.yaml").read_text().splitlines():
        m = re.match(r"(- |  )(\w+): (.*)$", line)
        if not m:
            continue
        if m.group(1) == "- ":
            current = {}
        current[m.group(2)] = m.group(3)
        if m.group(2) == "id":
            hooks[m.group(3)] = current
    return hooks


def test_every_hook_entry_is_a_lint_command_the_cli_accepts() -> None:
    hooks = _hooks()
    assert set(hooks) == {"trainguard-lint", "trainguard-lint-fix"}
    for hook in hooks.values():
        assert hook["language"] == "python"  # pip installs the repository, without extras
        program, *args = hook["entry"].split()
        assert program == "trainguard" and args[0] == "lint"
        parsed = cli.build_parser().parse_args([*args, "train.py", "nb.ipynb"])  # files appended
        assert parsed.command == "lint" and parsed.paths == ["train.py", "nb.ipynb"]
        assert hook["types_or"] == "[python, jupyter]"


def test_the_documented_config_names_existing_hooks_and_a_pinnable_rev() -> None:
    docs = (ROOT / "docs" / "lint.md").read_text()
    section = docs.split("## pre-commit\n", 1)[1].split("\n## ", 1)[0]
    config = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    assert re.search(r"^    rev: main$", config, re.M)  # a branch that exists; then frozen:
    assert "pre-commit autoupdate --bleeding-edge --freeze" in section
    ids = re.findall(r"- id: ([\w-]+)", config)
    assert ids and set(ids) <= set(_hooks())
    assert "v0.1.0" not in docs  # no tag that does not exist
