"""Run trainguard's CLI with the subcommands this checkout contains.

A branch may be merged before or after the others, so a subcommand whose module is absent here is
left out instead of breaking ``main``.
"""

import importlib.util
import sys

import trainguard.cli as cli


def _present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


cli._SUBCOMMANDS = [m for m in cli._SUBCOMMANDS if _present(m)]

if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:]))
