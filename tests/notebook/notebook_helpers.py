"""Helpers for the notebook tests (imported by name): write a notebook file."""

from __future__ import annotations

import json
from pathlib import Path


def write_notebook(path: Path, cells: list[tuple[str, str]]) -> Path:
    nb = {"cells": [{"cell_type": kind, "metadata": {}, "source": text.splitlines(keepends=True),
                     **({"outputs": [], "execution_count": None} if kind == "code" else {})}
                    for kind, text in cells],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path
