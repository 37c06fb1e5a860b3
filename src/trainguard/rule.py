"""``trainguard rule``: print a code's docs entry from the installed package, or list every code.

    trainguard rule TG201                      # the page: what it does, why, example, fix
    trainguard rule graph-kept-across-steps    # the same, by name
    trainguard rule --all                      # code, name and layers of every code
    trainguard rule --all --format json

Exit status: 0, or 2 for an unknown code or name. Standard library only, like the linter.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from trainguard.catalog import CATALOG, Entry, lookup, page
from trainguard.errors import UsageError

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rule", help="print a code's docs entry (trainguard rule TG201), or list every code",
        description="Print the docs entry of a finding code or name from the installed package "
        "(what it does, why it is bad, an example, what to write instead, references), or list "
        "every code with its name and the layers that catch it.")
    parser.add_argument("code", nargs="?", metavar="CODE",
                        help="a code such as TG201, or a name such as graph-kept-across-steps")
    parser.add_argument("--all", action="store_true", dest="all_codes",
                        help="list every code, its name and its layers (lint, run) instead")
    parser.add_argument("--format", choices=["text", "json"], default="text",
                        help="text: the Markdown page or a table; json: the entry's fields, its "
                        "published URL (helpUri) and, for one code, the page")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.all_codes and args.code:
        raise UsageError(f"give either a code ({args.code}) or --all, not both")
    if args.all_codes:
        entries = list(CATALOG.values())
        if args.format == "json":
            print(json.dumps({"rules": [_fields(e) for e in entries]}, indent=2))
        else:
            width = max(len(e.name) for e in entries)
            for e in entries:
                retired = "  (retired)" if e.retired else ""
                print(f"{e.code}  {e.name:<{width}}  {', '.join(e.layers)}{retired}")
        return 0
    if not args.code:
        raise UsageError("give a code such as TG201 (or a name), or --all to list them")
    try:
        entry = lookup(args.code)
    except KeyError:
        raise UsageError(f"{args.code!r} is not a trainguard code or name; `trainguard rule "
                         "--all` lists them") from None
    text = page(entry.code)
    if args.format == "json":
        print(json.dumps({**_fields(entry), "page": text}, indent=2))
    else:
        print(text, end="" if text.endswith("\n") else "\n")
    return 0


def _fields(entry: Entry) -> dict[str, Any]:
    data: dict[str, Any] = {"code": entry.code, "name": entry.name, "layers": list(entry.layers),
                            "summary": entry.summary, "why": entry.why, "fix": entry.fix,
                            "retired": entry.retired}
    if entry.help_uri:
        data["helpUri"] = entry.help_uri
    return data
