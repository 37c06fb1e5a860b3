"""Where trainguard's published docs and issue tracker are: ``[project.urls]`` of pyproject.toml.

The URLs are set once, in pyproject.toml. An installed trainguard reads them back from its
package metadata (``Project-URL: Documentation, https://...``); a source checkout run with
``PYTHONPATH=src`` reads the checkout's own pyproject.toml, so that the two never disagree with
the code that runs. Only the standard library is used: the linter calls this.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dependency there)
    import tomli as tomllib

__all__ = ["project_urls", "rule_url", "issues_url"]

_CHECKOUT_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@functools.cache
def project_urls() -> dict[str, str]:
    """``[project.urls]`` as ``{label: url}``; empty when neither source has any."""
    urls = _checkout_urls(_CHECKOUT_PYPROJECT)
    return urls if urls is not None else _installed_urls()


def rule_url(code: str) -> str | None:
    """The published page of ``code``: ``<Documentation>/rules/TG201.md``, or None if unset."""
    base = project_urls().get("Documentation")
    return f"{base.rstrip('/')}/rules/{code}.md" if base else None


def issues_url() -> str | None:
    """The issue tracker, where trainguard's own bugs (exit status 3) are reported."""
    return project_urls().get("Issues")


def _checkout_urls(pyproject: Path) -> dict[str, str] | None:
    """The URLs of the source checkout this module runs from, or None when it is installed."""
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    if project.get("name") != "trainguard":
        return None
    urls = project.get("urls", {})
    return {str(k): str(v) for k, v in urls.items()} if isinstance(urls, dict) else {}


def _installed_urls() -> dict[str, str]:
    from importlib import metadata

    try:
        entries = metadata.metadata("trainguard").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return {}
    urls = {}
    for entry in entries:  # "Label, https://..."
        label, _, url = entry.partition(",")
        urls[label.strip()] = url.strip()
    return urls
