"""Build hook: the rule pages of docs/rules/ go into the wheel as ``trainguard/docs/rules/*.md``.

docs/rules/ stays the one copy in the repository (the pages are read, linked and tested there);
the wheel gets a copy made at build time, which ``trainguard rule TG201`` reads from an installed
package. A source checkout or an editable install reads docs/rules/ itself. Everything else about
the build is in pyproject.toml.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

RULE_PAGES = Path("docs", "rules")


class BuildPyWithRulePages(build_py):
    """``build_py`` that also copies ``docs/rules/TG*.md`` into the built package."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads docs/rules/ from the checkout
        pages = sorted(RULE_PAGES.glob("TG*.md"))
        if not pages:
            raise FileNotFoundError(f"no rule pages in {RULE_PAGES}/: build from a checkout or an "
                                    "sdist that has them")
        target = Path(self.build_lib, "trainguard", "docs", "rules")
        self.mkpath(str(target))
        for page in pages:
            self.copy_file(str(page), str(target / page.name))


setup(cmdclass={"build_py": BuildPyWithRulePages})
