"""Small real image data for tests: scikit-learn's digits written out as PNG files."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_digits(root: Path, *, per_class: int = 6, size: int = 8, mode: str = "L",
                 offset: int = 0) -> list[tuple[str, int]]:
    """Write ``per_class`` digits of each class as PNGs under ``root/<label>/``; returns
    ``(relative path, label)`` rows."""
    from PIL import Image
    from sklearn.datasets import load_digits

    d = load_digits()
    rows = []
    for label in range(10):
        idx = np.flatnonzero(d.target == label)[offset:offset + per_class]
        (root / str(label)).mkdir(parents=True, exist_ok=True)
        for i in idx:
            img = Image.fromarray((d.images[i] * (255 / 16)).astype(np.uint8), "L")
            if size != 8:
                img = img.resize((size, size))
            rel = f"{label}/{i}.png"
            img.convert(mode).save(root / rel)
            rows.append((rel, label))
    return rows


def write_csv(path: Path, rows, header="path,label") -> Path:
    path.write_text(header + "\n" + "".join(f"{p},{l}\n" for p, l in rows))
    return path


