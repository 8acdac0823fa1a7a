"""Whole-file replacement of an index: a new file is written beside the target and swapped in only once it is
complete, so a failure leaves the previous index as it was. Builds and upgrades both go through here."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def temp_beside(target: Path, suffix: str) -> Path:
    """A new empty file in ``target``'s directory (same filesystem, so the swap is a rename), named
    ``.NAME.XXXX<suffix>``, readable as any new file is (``mkstemp`` alone makes it private)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(name, 0o666 & ~umask)
    return Path(name)


def swap_in(new: Path, target: Path) -> None:
    """Put the finished file ``new`` in place of ``target`` in one rename."""
    os.replace(new, target)


def discard(path: Path) -> None:
    """Remove an unfinished file and whatever SQLite kept beside it (``-journal``, ``-wal``, ``-shm``)."""
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
