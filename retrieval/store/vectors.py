"""The ``paper_vectors`` table: one text vector per paper for the semantic signal (``retrieval.embed``), written by
a build with ``--semantic`` and kept by every add and remove (a paper's vector is made from its own text alone, so
keeping them exact is writing the added papers' and deleting the removed ones: ``retrieval.store.writer``)."""

from __future__ import annotations

from collections.abc import Callable

from ..embed import BATCH, Encoder, pack, paper_text
from .sql.dialect import statement

INSERT_VECTOR = statement("INSERT INTO paper_vectors (paper_id, vector) VALUES (?, ?)")
DELETE_VECTORS = statement(lambda d: f"DELETE FROM paper_vectors WHERE paper_id {d.any_of('ids')}")
ALL_TEXTS_SQL = statement("SELECT id, title, abstract FROM papers ORDER BY id")


def encode_rows(encoder: Encoder, rows: list[tuple[str, str, str]]) -> list[tuple[str, bytes]]:
    """``(paper_id, title, abstract)`` rows as ``paper_vectors`` rows."""
    vectors = encoder.encode([paper_text(title, abstract or "") for _, title, abstract in rows])
    return list(zip([pid for pid, _, _ in rows], pack(vectors), strict=True))


def write_all(conn, encoder: Encoder, advance: Callable[[int], None] | None = None) -> int:
    """Encode every paper of a new index (in id order, ``BATCH`` at a time) into ``paper_vectors``; returns how
    many. ``advance`` is told the papers encoded so far after each batch."""
    cursor = conn.execute(ALL_TEXTS_SQL)
    written = 0
    while rows := cursor.fetchmany(BATCH * 8):
        encoded = encode_rows(encoder, rows)
        conn.executemany(INSERT_VECTOR, encoded)
        written += len(encoded)
        if advance:
            advance(written)
    return written
