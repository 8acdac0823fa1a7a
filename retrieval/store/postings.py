"""The derived postings table: each term's postings as a few BLOB rows, what long queries are scored from.

``term_freq`` (one row per posting) stays the table of record, readable with ``sqlite3``; ``postings`` holds the
same postings packed for NumPy, one row per *chunk* of at most ``CHUNK`` postings of one term, in doc-id order::

    term_id      the term (doc_freq.term_id)
    first_doc    the chunk's first doc id; with term_id, the key (a term's chunks in doc order)
    last_doc     its last doc id
    df           postings in the chunk
    max_count    the largest count in it, and
    min_length   the shortest paper in it: tf_norm(max_count, min_length) bounds every posting of the chunk
                 at any average length (tf_norm grows with the count and falls with the length), so the bound
                 stays exact after adds and removes
    doc_ids      little-endian, in one of three layouts, told apart by the width (the BLOB's length over ``df``)
                 and the chunk's span, ``last_doc - first_doc``:
                 - uint16 offsets (doc id - first_doc) when the span is below 65,536;
                 - uint16 gaps (0, then each doc id - the one before) when the span is larger but no gap is
                   (schema 0011: 2 bytes a posting rather than 4, for most lists of a large corpus);
                 - uint32 offsets otherwise
    counts       uint8, or uint16 / uint32 where a count needs it
    lengths      the papers' lengths, uint16, or uint32 where one needs it

A column's width is its byte length over ``df``, so nothing else records it. The small columns come first: SQLite
reads a record's BLOBs (overflow pages) only when a statement asks for them.

Every writer keeps the table equal to ``term_freq`` in the same transaction: the build writes it from its sorted
postings (``chunk_rows``), an add appends to each touched term's last chunk, a remove rewrites the chunks that held
the removed papers (``sync``), and migration 0007 derives it for an existing index (``derive``). ``check`` compares
it with ``term_freq`` (the tests use it after every kind of write).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from .sql.dialect import statement

TYPE_CHECKING = False
if TYPE_CHECKING:
    import numpy as np

#: Postings per chunk: a term's list is one row up to this, more rows beyond it. A row is the unit a read pays
#: for (rows of a few thousand postings cost little more than their bytes; rows of a hundred cost per row), and
#: an add rewrites only a term's last chunk.
CHUNK = 16384

INSERT_SQL = statement(
    "INSERT INTO postings (term_id, first_doc, last_doc, df, max_count, min_length, doc_ids, counts, lengths) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
DELETE_SQL = statement("DELETE FROM postings WHERE term_id = ? AND first_doc = ?")
# A term's last chunk (where an add appends).
LAST_CHUNKS_SQL = statement(
    lambda d: (
        f"""\
SELECT p.term_id, p.first_doc, p.last_doc, p.df, p.doc_ids, p.counts, p.lengths
FROM postings AS p
WHERE p.term_id IN ({d.values("term_ids", "integer")})
  AND p.first_doc = (SELECT max(q.first_doc) FROM postings AS q WHERE q.term_id = p.term_id)"""
    )
)
# The chunks of the given terms, whole (a remove rewrites those holding a removed paper).
CHUNKS_SQL = statement(
    lambda d: (
        f"""\
SELECT term_id, first_doc, last_doc, df, doc_ids, counts, lengths
FROM postings
WHERE term_id IN ({d.values("term_ids", "integer")})
ORDER BY term_id, first_doc"""
    )
)
# The postings an add wrote (doc ids from :first_doc on), from the table of record: a range of each term's
# primary key.
NEW_POSTINGS_SQL = statement(
    lambda d: (
        f"""\
SELECT tf.term_id, tf.doc_id, tf.count, dl.length
FROM term_freq AS tf
{d.cross_join} doc_len AS dl ON dl.doc_id = tf.doc_id
WHERE tf.term_id IN ({d.values("term_ids", "integer")})
  AND tf.doc_id >= :first_doc
ORDER BY tf.term_id, tf.doc_id"""
    )
)
ALL_POSTINGS_SQL = """\
SELECT tf.term_id, tf.doc_id, tf.count, dl.length
FROM term_freq AS tf
JOIN doc_len AS dl ON dl.doc_id = tf.doc_id
ORDER BY tf.term_id, tf.doc_id"""
ALL_CHUNKS_SQL = (
    "SELECT term_id, first_doc, last_doc, df, max_count, min_length, doc_ids, counts, lengths "
    "FROM postings ORDER BY term_id, first_doc"
)


def _np():
    import numpy as np  # only where postings are packed or read: a short query's process never imports it

    return np


def _pack(values: np.ndarray, widths: tuple[str, ...]) -> bytes:
    np = _np()
    top = int(values.max()) if len(values) else 0
    for dtype in widths:
        if top <= np.iinfo(dtype).max:
            return values.astype(dtype).tobytes()
    raise ValueError(f"a postings value {top} does not fit in 32 bits")


_DTYPES = {1: "<u1", 2: "<u2", 4: "<u4"}


def unpack(blob: bytes | memoryview, df: int) -> np.ndarray:
    """A packed column of ``df`` values (its width is its length over ``df``), as a read-only array."""
    return _np().frombuffer(blob, dtype=_DTYPES[len(blob) // df], count=df)


#: The span of doc ids (``last_doc - first_doc``) from which a chunk's 2-byte ``doc_ids`` are gaps, not offsets.
GAPS_FROM = 1 << 16


def gapped(blob: bytes | memoryview, df: int, span: int) -> bool:
    """Whether a chunk's ``doc_ids`` hold gaps between doc ids (2 bytes each, the span too wide for offsets)."""
    return len(blob) == 2 * df and span >= GAPS_FROM


def pack_docs(docs: np.ndarray) -> bytes:
    """The ``doc_ids`` column of a chunk's doc ids (ascending): offsets from the first in 2 bytes where the span
    allows, else the gaps in 2 bytes where each does, else offsets in 4."""
    np = _np()
    if len(docs) > 1 and int(docs[-1] - docs[0]) >= GAPS_FROM:
        gaps = np.diff(docs, prepend=docs[0])  # 0 first
        if int(gaps.max()) < GAPS_FROM:
            return gaps.astype("<u2").tobytes()
    return _pack(docs - docs[0], ("<u2", "<u4"))


def offsets(blob: bytes | memoryview, df: int, span: int) -> np.ndarray:
    """A chunk's doc ids less its first, ascending: as stored (read-only, 2 or 4 bytes each), or summed from its
    gaps (int64)."""
    np = _np()
    stored = unpack(blob, df)
    return np.cumsum(stored, dtype=np.int64) if gapped(blob, df, span) else stored


def docs_into(blob: bytes | memoryview, df: int, first: int, span: int, out: np.ndarray) -> np.ndarray:
    """A chunk's doc ids written into ``out`` (int64, ``df`` long)."""
    np = _np()
    stored = unpack(blob, df)
    if gapped(blob, df, span):
        np.cumsum(stored, dtype=np.int64, out=out)
        out += first
        return out
    return np.add(stored, np.int64(first), out=out)


def encode(term_id: int, docs: np.ndarray, counts: np.ndarray, lengths: np.ndarray) -> tuple:
    """One row of ``postings`` for a chunk of ``term_id``'s postings (doc ids ascending, at most ``CHUNK``)."""
    return (
        int(term_id),
        int(docs[0]),
        int(docs[-1]),
        len(docs),
        int(counts.max()),
        int(lengths.min()),
        pack_docs(docs),
        _pack(counts, ("<u1", "<u2", "<u4")),
        _pack(lengths, ("<u2", "<u4")),
    )


def decode(
    first_doc: int, last_doc: int, df: int, doc_ids, counts, lengths
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The doc ids (int64), counts and lengths of a chunk's row (``last_doc`` says how its doc ids are packed)."""
    np = _np()
    docs = docs_into(doc_ids, df, first_doc, last_doc - first_doc, np.empty(df, dtype=np.int64))
    return docs, unpack(counts, df), unpack(lengths, df)


class DamagedChunk(ValueError):
    """A row of ``postings`` whose columns cannot hold its ``df`` postings (the file was changed by hand)."""


def shape_problem(
    first: object, last: object, df: object, doc_ids: object, counts: object, lengths: object
) -> str | None:
    """What is wrong with a row's range, ``df`` and columns as this module packs them (None: nothing): BLOBs for
    the columns, numbers for the range (it says how the doc ids are packed), 2 or 4 bytes a doc id, 1, 2 or 4 a
    count, 2 or 4 a length, for a ``df`` of 1 to ``CHUNK``. The one check of a row's shape: the writers', a
    search's (``retrieval.search.blobs``) and ``retrieval check``'s."""
    blobs = (doc_ids, counts, lengths)
    binary = (bytes, memoryview)  # (checked one by one: a search checks every row it reads)
    if not (isinstance(doc_ids, binary) and isinstance(counts, binary) and isinstance(lengths, binary)):
        # a value put there by hand: bytes() of a number is that many zero bytes, of text an error
        kinds = [type(b).__name__ for b in blobs if not isinstance(b, binary)]
        return f"holds {', '.join(kinds)} values where its columns are BLOBs"
    if not (isinstance(first, int) and isinstance(last, int)):
        return f"gives documents {first!r}-{last!r}, not numbers"
    if not (isinstance(df, int) and 1 <= df <= CHUNK):
        return f"holds {df!r} postings, where a row holds 1 to {CHUNK}"
    if not (
        len(doc_ids) in (2 * df, 4 * df) and len(counts) in (df, 2 * df, 4 * df) and len(lengths) in (2 * df, 4 * df)
    ):
        return f"holds columns of {[len(b) for b in blobs]} bytes for a df of {df}"
    return None


def _check_shape(term_id: int, first, last, df, doc_ids, counts, lengths) -> None:
    """``DamagedChunk`` naming a row a writer rewrites whose ``shape_problem`` is not None."""
    problem = shape_problem(first, last, df, doc_ids, counts, lengths)
    if problem is not None:
        raise DamagedChunk(f"the postings row of term {term_id} at document {first!r} {problem}")


def _decoded(term_id: int, first: int, last: int, df, doc_ids, counts, lengths) -> tuple:
    """``decode`` of a row a writer rewrites, checked first (``DamagedChunk`` naming it)."""
    _check_shape(term_id, first, last, df, doc_ids, counts, lengths)
    return decode(first, last, df, doc_ids, counts, lengths)


def chunk_rows(terms: np.ndarray, docs: np.ndarray, counts: np.ndarray, lengths: np.ndarray) -> Iterator[tuple]:
    """The rows of ``postings`` for postings sorted by ``(term, doc)`` (the build's arrays, or a table's)."""
    for start, end in _runs(terms):
        for a in range(start, end, CHUNK):
            b = min(a + CHUNK, end)
            yield encode(terms[a], docs[a:b], counts[a:b], lengths[a:b])


def _runs(terms: np.ndarray) -> list[tuple[int, int]]:
    """``(start, end)`` of each term's run in ``terms`` (sorted)."""
    np = _np()
    if not len(terms):
        return []
    starts = np.flatnonzero(np.r_[True, terms[1:] != terms[:-1]])
    return list(zip(starts.tolist(), np.r_[starts[1:], len(terms)].tolist(), strict=True))


def _arrays(rows: list[tuple]) -> tuple[np.ndarray, ...]:
    np = _np()
    table = np.array(rows, dtype=np.int64).reshape(-1, 4)
    return table[:, 0], table[:, 1], table[:, 2], table[:, 3]


def derive(batches: Iterable[list[tuple]]) -> Iterator[list[tuple]]:
    """The rows of ``postings`` for ``(term_id, doc_id, count, length)`` postings sorted by term then doc,
    arriving in batches (migration 0007 reads ``term_freq`` so): a batch of rows per batch read, a term cut by
    a batch's end kept back until its list is whole."""
    carry: list[tuple] = []
    for batch in batches:
        rows = carry + [tuple(r) for r in batch]
        if not rows:
            continue
        last = rows[-1][0]
        cut = len(rows)
        while cut and rows[cut - 1][0] == last:
            cut -= 1
        rows, carry = rows[:cut], rows[cut:]
        if rows:
            yield list(chunk_rows(*_arrays(rows)))
    if carry:
        yield list(chunk_rows(*_arrays(carry)))


def sync(conn, first_new_doc: int, removed: dict[int, set[int]], added_terms: Iterable[int]) -> None:
    """Bring ``postings`` in line with ``term_freq`` after a write transaction's changes: ``removed`` maps each
    term to the doc ids removed from it (those below ``first_new_doc``, the first doc id this transaction
    assigned), ``added_terms`` the terms that gained postings (doc ids from ``first_new_doc`` on)."""
    np = _np()
    if removed:
        for term_id, first, last, df, doc_ids, counts, lengths in conn.execute(
            CHUNKS_SQL, {"term_ids": json.dumps(sorted(removed))}
        ).fetchall():
            _check_shape(term_id, first, last, df, doc_ids, counts, lengths)  # before its range is compared
            gone = [d for d in removed[term_id] if first <= d <= last]
            if not gone:
                continue
            docs, cs, ls = decode(first, last, df, doc_ids, counts, lengths)
            keep = ~np.isin(docs, np.array(gone, dtype=np.int64))
            conn.execute(DELETE_SQL, (term_id, first))
            if keep.any():
                conn.executemany(INSERT_SQL, [encode(term_id, docs[keep], cs[keep], ls[keep])])
    added = sorted(set(added_terms))
    if not added:
        return
    new = conn.execute(NEW_POSTINGS_SQL, {"term_ids": json.dumps(added), "first_doc": first_new_doc}).fetchall()
    if not new:
        return
    terms, docs, cs, ls = _arrays([tuple(r) for r in new])
    tails = {row[0]: row for row in conn.execute(LAST_CHUNKS_SQL, {"term_ids": json.dumps(added)}).fetchall()}
    rows: list[tuple] = []
    for start, end in _runs(terms):
        term_id = int(terms[start])
        d, c, le = docs[start:end], cs[start:end], ls[start:end]
        tail = tails.get(term_id)
        if tail is not None and tail[3] < CHUNK:  # the last chunk has room: rewritten with the new postings
            _, first, last, df, doc_ids, counts, lengths = tail
            old = _decoded(term_id, first, last, df, doc_ids, counts, lengths)
            conn.execute(DELETE_SQL, (term_id, first))
            d, c, le = (np.concatenate([o.astype(np.int64), n]) for o, n in zip(old, (d, c, le), strict=True))
        for a in range(0, len(d), CHUNK):
            rows.append(encode(term_id, d[a : a + CHUNK], c[a : a + CHUNK], le[a : a + CHUNK]))
    conn.executemany(INSERT_SQL, rows)


def check(conn) -> list[str]:
    """How ``postings`` differs from ``term_freq`` (empty when it holds exactly its postings, chunked as this
    module writes them, with right bounds): what the tests assert after every kind of write."""
    np = _np()
    problems: list[str] = []
    expected: dict[int, list] = {}
    rows = [tuple(r) for r in conn.execute(ALL_POSTINGS_SQL).fetchall()]
    if rows:
        terms, docs, cs, ls = _arrays(rows)
        for start, end in _runs(terms):
            expected[int(terms[start])] = [docs[start:end], cs[start:end], ls[start:end]]
    found: dict[int, list] = {}
    for term_id, first, last, df, max_count, min_length, doc_ids, counts, lengths in conn.execute(ALL_CHUNKS_SQL):
        d, c, le = decode(first, last, df, doc_ids, counts, lengths)
        if not (1 <= df <= CHUNK) or d[0] != first or d[-1] != last or (len(d) > 1 and (np.diff(d) <= 0).any()):
            problems.append(f"term {term_id}: chunk at {first} is malformed")
        if max_count != int(c.max()) or min_length != int(le.min()):
            problems.append(f"term {term_id}: chunk at {first} has wrong bounds")
        found.setdefault(term_id, [[], [], []])
        for part, values in zip(found[term_id], (d, c, le), strict=True):
            part.append(values.astype(np.int64))
    for term_id in sorted(set(expected) | set(found)):
        want = expected.get(term_id)
        got = [np.concatenate(p) for p in found[term_id]] if term_id in found else None
        if want is None or got is None:
            problems.append(f"term {term_id}: in {'postings' if want is None else 'term_freq'} only")
        elif not all(np.array_equal(w, g) for w, g in zip(want, got, strict=True)):
            problems.append(f"term {term_id}: postings differ from term_freq")
    return problems
