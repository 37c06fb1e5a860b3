"""Exit statuses shared by every subcommand (see docs/cli.md).

An interrupted training run exits with ``128 + signal`` (130 for SIGINT, 143 for SIGTERM);
``trainguard run`` otherwise passes the script's own exit status through.
"""

CLEAN = 0
FINDINGS = 1
USAGE = 2
INTERNAL = 3
