"""postings doc ids as 2-byte gaps: a chunk spanning 65,536 doc ids or more keeps the gaps between them

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05 00:00:00

A chunk of ``postings`` kept its doc ids as offsets from ``first_doc``: 2 bytes each when the chunk spans fewer
than 65,536 ids, else 4, which is most lists of a large corpus. Such a chunk now keeps the gaps between its doc
ids (0 first), 2 bytes each, where no gap reaches 65,536; the reader tells the layouts apart by the width and the
span (``retrieval.store.postings``). Only ``doc_ids`` of those rows changes; ``term_freq`` is untouched. The
revision says an older version must not read such rows as offsets.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The span from which 2-byte doc ids are gaps (``retrieval.store.postings.GAPS_FROM`` as this revision wrote it).
GAPS_FROM = 65536
BATCH = 2000

# The chunks whose doc ids this revision rewrites, a batch at a time by key: 4-byte offsets (upgrade) or 2-byte
# gaps (downgrade) of a chunk spanning GAPS_FROM ids or more.
ROWS = """
SELECT term_id, first_doc, df, doc_ids
FROM postings
WHERE length(doc_ids) = :width * df
  AND last_doc - first_doc >= :gaps_from
  AND (term_id > :term_id OR (term_id = :term_id AND first_doc > :first_doc))
ORDER BY term_id, first_doc
LIMIT :batch
"""

REWRITE = """
UPDATE postings
SET doc_ids = :doc_ids
WHERE term_id = :term_id
  AND first_doc = :first_doc
"""


def _rows(conn, width: int) -> Iterator[list]:
    """The rows to rewrite, in key order, a batch at a time (each batch read whole before it is rewritten)."""
    key = {"term_id": -(2**62), "first_doc": -(2**62)}
    while True:
        params = {"width": width, "gaps_from": GAPS_FROM, "batch": BATCH, **key}
        rows = conn.execute(sa.text(ROWS), params).fetchall()
        if not rows:
            return
        yield rows
        key = {"term_id": rows[-1][0], "first_doc": rows[-1][1]}


def _rewrite(width: int, convert) -> None:
    # Offline (``alembic upgrade --sql``) there are no rows: only the revision changes.
    if op.get_context().as_sql:
        return
    conn = op.get_bind()
    for rows in _rows(conn, width):
        changed = []
        for term_id, first_doc, df, doc_ids in rows:
            packed = convert(bytes(doc_ids), df)
            if packed is not None:
                changed.append({"term_id": term_id, "first_doc": first_doc, "doc_ids": packed})
        if changed:
            conn.execute(sa.text(REWRITE), changed)


def _to_gaps(blob: bytes, df: int) -> bytes | None:
    import numpy as np

    offsets = np.frombuffer(blob, dtype="<u4", count=df).astype(np.int64)
    gaps = np.diff(offsets, prepend=offsets[0])
    return gaps.astype("<u2").tobytes() if int(gaps.max()) < GAPS_FROM else None


def _to_offsets(blob: bytes, df: int) -> bytes:
    import numpy as np

    return np.cumsum(np.frombuffer(blob, dtype="<u2", count=df), dtype=np.int64).astype("<u4").tobytes()


def upgrade() -> None:
    _rewrite(4, _to_gaps)
    op.execute("UPDATE index_info SET value = '0011' WHERE key = 'schema_revision'")


def downgrade() -> None:
    op.execute("UPDATE index_info SET value = '0010' WHERE key = 'schema_revision'")
    _rewrite(2, _to_offsets)
