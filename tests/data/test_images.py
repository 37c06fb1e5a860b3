"""CSV and folder datasets: what is read, and every bad input named by file and row."""

from __future__ import annotations

import pytest
import torch

from trainguard.data.build import DataConfig, build_datasets
from trainguard.data.images import ImageSpec, read_csv_dataset, read_folder_dataset
from trainguard.errors import DataError

from imagefiles import write_csv, write_digits


def test_csv_reads_every_row_with_its_label(digits_pngs):
    root, csv, rows = digits_pngs
    ds = read_csv_dataset(csv, root, ImageSpec())
    assert len(ds) == len(rows) == 60
    assert ds.labels.tolist() == [label for _, label in rows]
    assert ds.images.shape == (60, 1, 8, 8) and ds.images.dtype == torch.uint8
    assert ds.num_classes == 10


def test_folder_classes_in_sorted_order(tmp_path):
    root = tmp_path / "imgs"
    write_digits(root, per_class=2)
    (root / "9").rename(root / "a_nine")
    ds = read_folder_dataset(root, ImageSpec(channels=3, image_size=(12, 10)))
    assert ds.classes == sorted(["0", "1", "2", "3", "4", "5", "6", "7", "8", "a_nine"])
    assert ds.images.shape == (20, 3, 12, 10)
    assert ds.labels.tolist() == [i // 2 for i in range(20)]


def test_normalization_uses_the_training_split_statistics(digits_pngs):
    root, csv, _ = digits_pngs
    train, val = build_datasets(DataConfig(data="csv", csv=str(csv), root=str(root),
                                           val_fraction=0.5, seed=3))
    xs = torch.stack([train[i][0] for i in range(len(train))])
    assert xs.mean().item() == pytest.approx(0.0, abs=1e-5)
    assert xs.std(unbiased=False).item() == pytest.approx(1.0, abs=1e-4)
    assert len(train) == len(val) == 30
    assert torch.bincount(val.labels).tolist() == [3] * 10  # stratified


def test_split_is_seeded(digits_pngs):
    root, csv, _ = digits_pngs
    a = build_datasets(DataConfig(data="csv", csv=str(csv), root=str(root), seed=1))[1]
    b = build_datasets(DataConfig(data="csv", csv=str(csv), root=str(root), seed=1))[1]
    c = build_datasets(DataConfig(data="csv", csv=str(csv), root=str(root), seed=2))[1]
    assert torch.equal(a.images, b.images) and not torch.equal(a.images, c.images)


def test_given_mean_and_std_are_used(digits_pngs):
    root, csv, _ = digits_pngs
    train, _ = build_datasets(DataConfig(data="csv", csv=str(csv), root=str(root),
                                         mean=(0.5,), std=(0.25,)))
    raw = train.images[0].float() / 255
    torch.testing.assert_close(train[0][0], (raw - 0.5) / 0.25)


def _bad(tmp_path, root, text):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    return p


@pytest.mark.parametrize("text,needle", [
    ("", "the CSV is empty"),
    ("path,label\n", "header but no rows"),
    ("file_name,label\n0/0.png,0\n", "no image path column"),
    ("path,klass\n0/0.png,0\n", "column 'label' not in header"),
    ("path,label\n0/0.png,0\n0/missing.png,1\n", "line 3: image not found"),
    ("path,label\n0/0.png,zero\n", "line 2: label 'zero' is not an integer"),
    ("path,label\n0/0.png,-1\n", "line 2: label -1 is out of range"),
    ("path,label\n0/0.png,0,extra\n", "line 2: expected 2 fields"),
    ("path,label\n,0\n", "line 2: empty image path"),
    ("path,label\nbroken.png,0\n", "line 2: cannot read image"),
])
def test_bad_csv_names_file_and_line(tmp_path, digits_pngs, text, needle):
    root, _, _ = digits_pngs
    (root / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really a png")
    with pytest.raises(DataError) as err:
        read_csv_dataset(_bad(tmp_path, root, text), root, ImageSpec())
    assert needle in str(err.value) and "bad.csv" in str(err.value)


def test_truncated_image_is_caught_up_front(tmp_path, digits_pngs):
    root, _, rows = digits_pngs
    path = root / rows[5][0]
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(DataError, match="line 7: cannot read image"):
        read_csv_dataset(write_csv(tmp_path / "t.csv", rows), root, ImageSpec())


def test_label_out_of_range_of_num_classes(tmp_path, digits_pngs):
    root, _, _ = digits_pngs
    with pytest.raises(DataError, match=r"line 2: label 9 is out of range .*\[0, 5\)"):
        read_csv_dataset(_bad(tmp_path, root, "path,label\n0/0.png,9\n"), root, ImageSpec(),
                         num_classes=5)


def test_mixed_sizes_without_image_size(tmp_path, digits_pngs):
    from PIL import Image

    root, _, rows = digits_pngs
    Image.new("L", (9, 8)).save(root / "wide.png")
    csv = write_csv(tmp_path / "m.csv", rows[:3] + [("wide.png", 1)])
    with pytest.raises(DataError, match="line 5: image is 9x8 .* pass --image-size"):
        read_csv_dataset(csv, root, ImageSpec())
    assert len(read_csv_dataset(csv, root, ImageSpec(image_size=(8, 8)))) == 4


def test_folder_errors(tmp_path):
    with pytest.raises(DataError, match="image folder not found"):
        read_folder_dataset(tmp_path / "nope", ImageSpec())
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no class sub-folders"):
        read_folder_dataset(tmp_path / "empty", ImageSpec())
    root = tmp_path / "imgs"
    write_digits(root, per_class=1)
    (root / "extra").mkdir()
    with pytest.raises(DataError, match=r"imgs/extra: class folder holds no images"):
        read_folder_dataset(root, ImageSpec())


def test_validation_folder_with_unknown_class(tmp_path):
    train, val = tmp_path / "train", tmp_path / "val"
    write_digits(train, per_class=3)
    write_digits(val, per_class=1, offset=3)
    (val / "0").rename(val / "zero")
    with pytest.raises(DataError, match=r"\['zero'\] are not among the training classes"):
        build_datasets(DataConfig(data="folder", root=str(train), val_root=str(val)))


def test_csv_without_root_is_a_usage_error():
    with pytest.raises(DataError, match="--data csv needs --csv FILE and --root DIR"):
        build_datasets(DataConfig(data="csv", csv="x.csv"))


def test_batched_fetch_equals_per_item_fetch(digits_pngs):
    root, csv, _ = digits_pngs
    train, _ = build_datasets(DataConfig(data="csv", csv=str(csv), root=str(root)))
    idx = [5, 0, 17, 5]
    batch = train.__getitems__(idx)
    for i, (x, y) in zip(idx, batch):
        torch.testing.assert_close(x, train[i][0], rtol=0, atol=1e-6)
        assert y == train[i][1]


def test_a_label_that_skips_classes_is_caught_unless_num_classes_says_so(tmp_path, digits_pngs):
    root, _, rows = digits_pngs
    csv = write_csv(tmp_path / "typo.csv", rows + [(rows[0][0], 12)])
    with pytest.raises(DataError, match=r"no row has label\(s\) \[10, 11\].*--num-classes 13"):
        read_csv_dataset(csv, root, ImageSpec())
    assert read_csv_dataset(csv, root, ImageSpec(), num_classes=13).num_classes == 13
