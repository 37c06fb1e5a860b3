"""scikit-learn's bundled handwritten digits: 1,797 real 8x8 grey-level images of 10 classes.

Source: the UCI "Optical Recognition of Handwritten Digits" test set, shipped inside scikit-learn
(``sklearn.datasets.load_digits``), so it needs no download. Pixel values are integers 0-16.
"""

from __future__ import annotations

import torch

from trainguard.data.dataset import ImageTensorDataset

__all__ = ["load_digits_dataset"]


def load_digits_dataset() -> ImageTensorDataset:
    """All 1,797 digits as an un-normalized :class:`ImageTensorDataset`.

    Images are ``(1797, 1, 8, 8)`` ``float32`` with values 0-16, scaled to ``[0, 1]`` on access;
    labels are ``int64`` digits 0-9. Normalize with the training split's statistics
    (:func:`trainguard.data.dataset.channel_stats`).
    """
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = torch.from_numpy(bunch.images.astype("float32")).unsqueeze(1)
    labels = torch.from_numpy(bunch.target.astype("int64"))
    return ImageTensorDataset(images, labels, scale=1 / 16, mean=torch.zeros(1),
                              std=torch.ones(1), classes=[str(d) for d in range(10)])
