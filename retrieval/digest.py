"""The sha256 of a file, read a megabyte at a time: how an index's corpus, a model file and a semantic model's
weights are named by their content."""

from __future__ import annotations

import hashlib
import os

BLOCK = 1 << 20


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of the file's bytes, as hex (``OSError`` where it cannot be read)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()
