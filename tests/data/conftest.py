"""Fixtures for the data tests."""

import pytest

from imagefiles import write_csv, write_digits


@pytest.fixture
def digits_pngs(tmp_path):
    root = tmp_path / "images"
    rows = write_digits(root)
    csv = write_csv(tmp_path / "train.csv", rows)
    return root, csv, rows
