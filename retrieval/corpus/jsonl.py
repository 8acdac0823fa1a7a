"""Reader for the project's JSONL corpus format, one paper per line.

``{"id": str, "title": str, "abstract": str, "year": int | null, "authors": [str], "references": [str]}``

Only ``id`` (non-empty) and ``title`` (a string, possibly empty) are required.
Every bad record raises ``InputError`` naming ``file:line``.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from ..errors import InputError
from .paper import Paper


def _open(path: Path) -> IO[bytes]:
    with open(path, "rb") as probe:
        magic = probe.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")


def _string_list(value: object, field: str, where: tuple[str, int]) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(*where, f"'{field}' must be a list of strings, got {json.dumps(value)[:80]}")
    return value


def parse_record(line: str, where: tuple[str, int], source: str) -> Paper:
    """One JSONL line to a ``Paper``; ``where`` is ``(file, line number)`` for the error message."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(*where, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(record, dict):
        raise InputError(*where, f"expected a JSON object, got {type(record).__name__}")
    pid = record.get("id")
    if not isinstance(pid, str) or not pid.strip():
        raise InputError(*where, "missing 'id' (a non-empty string)")
    title = record.get("title")
    if not isinstance(title, str):  # an empty title is allowed: real corpora have a few (CACM does)
        raise InputError(*where, f"paper {pid!r} has no 'title' (a string; add the field, empty if unknown)")
    abstract = record.get("abstract")
    if abstract is None:
        abstract = ""
    if not isinstance(abstract, str):
        raise InputError(*where, f"paper {pid!r}: 'abstract' must be a string or null")
    year = record.get("year")
    if year is not None and (isinstance(year, bool) or not isinstance(year, int)):
        raise InputError(*where, f"paper {pid!r}: 'year' must be an integer or null, got {json.dumps(year)}")
    return Paper(
        id=pid,
        title=title,
        abstract=abstract,
        year=year,
        authors=_string_list(record.get("authors"), "authors", where),
        references=_string_list(record.get("references"), "references", where),
        source=source,
    )


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, Paper]]:
    """Stream ``(line number, Paper)`` from a JSONL file (plain or gzip); blank lines are skipped.

    Raises ``InputError`` with ``file:line`` on the first bad record, including a duplicate id.
    """
    path = Path(path)
    source = path.name
    seen: set[str] = set()
    with _open(path) as handle:
        for lineno, raw in enumerate(handle, start=1):
            where = (str(path), lineno)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(*where, f"not UTF-8 text ({exc.reason})") from None
            if not line.strip():
                continue
            paper = parse_record(line, where, source)
            if paper.id in seen:
                raise InputError(*where, f"duplicate id {paper.id!r}: each paper may appear once")
            seen.add(paper.id)
            yield lineno, paper
