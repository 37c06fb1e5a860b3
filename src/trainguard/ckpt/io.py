"""Atomic checkpoint files and verified, safe loading.

Writing: the payload goes to a temporary file in the same folder, is flushed and fsynced, then
renamed over the target with ``os.replace`` (atomic on POSIX and Windows) and the folder is fsynced,
so a crash at any moment leaves either the old file or the new one, never a half-written one.

Loading: ``torch.load`` does not check the CRC-32 that its zip format stores for every record, so a
flipped byte in tensor data loads silently. :func:`verify_checkpoint` tests every record's CRC with
:mod:`zipfile` first; loading then uses ``weights_only=True``, so a checkpoint whose pickle would
run code is refused (https://pytorch.org/docs/stable/generated/torch.load.html).
"""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path
from typing import Any, BinaryIO, Callable

import torch

from trainguard.errors import CheckpointError

__all__ = ["atomic_write", "atomic_save", "verify_checkpoint", "load_verified", "atomic_link",
           "fsync_folder"]

FORMAT = "trainguard-checkpoint"
FORMAT_VERSION = 1


def fsync_folder(folder: Path) -> None:
    """fsync a folder: its renames are durable once this returns."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # e.g. Windows cannot open folders; the rename is still atomic there
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | Path, write: Callable[[BinaryIO], Any], *, fsync: bool = True,
                 fsync_dir: bool = True) -> Path:
    """Write a file atomically: ``write(fh)`` fills a temporary file in the same folder, which is
    flushed, fsynced and renamed over ``path``; the folder is fsynced. On failure the temporary
    file is removed and ``path`` keeps its old content.

    Args:
        fsync: fsync the file before the rename (what makes its content durable).
        fsync_dir: fsync the folder after the rename (what makes the rename durable); off when
            the caller renames several files and fsyncs the folder once (:func:`fsync_dir`).

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    if fsync_dir:
        fsync_folder(path.parent)
    return path


def atomic_save(payload: dict[str, Any], path: str | Path, *, fsync_dir: bool = True) -> Path:
    """Write ``payload`` with ``torch.save`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda fh: torch.save(payload, fh), fsync_dir=fsync_dir)


def atomic_link(source: str | Path, target: str | Path, *, fsync_dir: bool = True) -> Path:
    """Make ``target`` a second name of the finished file ``source``, atomically (a hard link
    renamed into place; a copy where hard links are not supported)."""
    source, target = Path(source), Path(target)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        try:
            os.link(source, tmp)
        except OSError:
            import shutil

            shutil.copyfile(source, tmp)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    if fsync_dir:
        fsync_folder(target.parent)
    return target


def verify_checkpoint(path: str | Path) -> None:
    """Check that ``path`` is a whole, undamaged ``torch.save`` zip file.

    Raises:
        CheckpointError: the file is missing, truncated, not a zip, or a record's CRC-32 does not
            match its bytes (names the record).
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        with zipfile.ZipFile(path) as zf:
            bad = zf.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise CheckpointError(f"{path}: damaged or truncated checkpoint ({exc})") from exc
    except zipfile.LargeZipFile as exc:  # pragma: no cover - > 2 GiB without zip64
        raise CheckpointError(f"{path}: cannot verify checkpoint: {exc}") from exc
    if bad is not None:
        raise CheckpointError(f"{path}: damaged checkpoint: record {bad!r} fails its CRC-32 check")


def load_verified(path: str | Path, *, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Verify ``path`` and load it with ``weights_only=True``.

    Raises:
        CheckpointError: damaged (see :func:`verify_checkpoint`), or the pickle holds objects the
            safe loader refuses (it could run code), or it is not a trainguard checkpoint.
    """
    verify_checkpoint(path)
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"{path}: refused to load: the file holds Python objects that "
            f"torch.load(weights_only=True) does not allow (loading them could run code). "
            f"Only load it with weights_only=False if you trust where it came from. ({exc})"
        ) from exc
    except (RuntimeError, EOFError, OSError) as exc:
        raise CheckpointError(f"{path}: damaged checkpoint ({exc})") from exc
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a trainguard checkpoint (no format marker "
                              f"{FORMAT!r}); load it with torch.load instead")
    if payload.get("format_version", 0) > FORMAT_VERSION:
        raise CheckpointError(f"{path}: checkpoint format version "
                              f"{payload.get('format_version')} is newer than this trainguard "
                              f"reads ({FORMAT_VERSION}); upgrade trainguard")
    return payload
