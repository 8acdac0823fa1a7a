"""Changing an index in place: papers added to and removed from an existing file, one transaction each.

``IndexWriter`` keeps every statistic exact as it goes: after any sequence of adds and removes the tables and the
BM25 scores equal those of a full rebuild from the same final corpus (only the surrogate numbers may differ:
``term_id`` and the citations' ``paper_keys``). A failure (a bad record, a full disk, Ctrl-C) rolls the
transaction back and leaves the index as it was. The full build is ``retrieval.store.sqlite.build``.

The same writer writes to an index on PostgreSQL (a ``DatabaseURL``): each statement below has its PostgreSQL
text registered beside it (``register``), run by ``retrieval.store.postgres.write``, which also holds the writers' lock
there (writers run one at a time; readers never wait).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice

from .. import embed
from ..config import DatabaseURL
from ..corpus.paper import Paper
from ..errors import InputError, NotAnIndexError
from ..text import Analyser
from ..validate import quoted
from .backend import Backend, backend_of
from .database import build_command
from .postings import DamagedChunk
from .postings import sync as sync_postings
from .rows import (
    INSERT_AUTHOR,
    INSERT_DOC_LEN,
    INSERT_PAPER,
    INSERT_SOURCE,
    TERM_TOTALS_SQL,
    CorpusCounts,
    ReferenceCleaner,
    UniqueIds,
    WriteSummary,
    add_paper_rows,
    write_statistics,
)
from .sql.dialect import statement
from .vectors import DELETE_VECTORS, INSERT_VECTOR, encode_rows

_BATCH = 2000
# Seconds a writer waits for another writer's lock before it gives up.
_BUSY_TIMEOUT_MS = 30_000


@dataclass
class _Batch:
    """Rows waiting to be written, flushed every ``_BATCH`` papers with one ``executemany`` per statement."""

    papers: list[tuple] = field(default_factory=list)
    authors: list[tuple] = field(default_factory=list)
    sources: list[tuple] = field(default_factory=list)
    references: list[tuple] = field(default_factory=list)
    cited_by: list[tuple] = field(default_factory=list)
    term_freq: list[tuple] = field(default_factory=list)
    doc_len: list[tuple] = field(default_factory=list)
    df_delta: Counter = field(default_factory=Counter)
    new_terms: list[tuple] = field(default_factory=list)


# Citations are stored as numbers (``paper_keys``, ``citation_links``); the writer numbers the ids it has not seen,
# from the largest number plus one, under the writers' lock (sent as COPY on PostgreSQL).
KEYS_SQL = statement(lambda d: f"SELECT paper_id, key FROM paper_keys WHERE paper_id IN ({d.values('ids')})")
# The largest number in use, in either table: a number a hand edit took out of paper_keys but left in citation_links
# is never given to a new id (which would take over its citations and hide the damage from `check`).
LAST_KEY_SQL = statement("""\
SELECT max(n)
FROM (SELECT max(key) AS n FROM paper_keys
      UNION ALL
      SELECT max(citing_key) FROM citation_links
      UNION ALL
      SELECT max(cited_key) FROM citation_links) AS used""")
INSERT_KEY = statement("INSERT INTO paper_keys (key, paper_id) VALUES (?, ?)")
# An edge may already be there, declared by the other paper's record: then only the flag is set. PostgreSQL:
# an update, else an insert, in one statement (the writers' lock keeps it from racing another writer), because
# ON CONFLICT needs a unique index there, which a table partitioned over shards cannot have
# (retrieval.store.postgres.shards).
_UPSERT = """\
INSERT INTO citation_links (citing_key, cited_key, listed_by_citing, listed_by_cited)
VALUES (?, ?, {values})
ON CONFLICT (citing_key, cited_key) DO UPDATE SET {flag} = 1"""
_UPSERT_POSTGRESQL = """\
WITH edge (citing_key, cited_key) AS (
    VALUES (CAST(? AS integer), CAST(? AS integer))
),
updated AS (
    UPDATE citation_links AS c
    SET {flag} = true
    FROM edge AS e
    WHERE c.citing_key = e.citing_key
      AND c.cited_key = e.cited_key
    RETURNING c.citing_key
)
INSERT INTO citation_links (citing_key, cited_key, listed_by_citing, listed_by_cited)
SELECT e.citing_key, e.cited_key, {values}
FROM edge AS e
WHERE NOT EXISTS (SELECT 1 FROM updated)"""
UPSERT_REFERENCE = statement(
    _UPSERT.format(flag="listed_by_citing", values="1, 0"),
    postgresql=_UPSERT_POSTGRESQL.format(flag="listed_by_citing", values="true, false"),
)
UPSERT_CITED_BY = statement(
    _UPSERT.format(flag="listed_by_cited", values="0, 1"),
    postgresql=_UPSERT_POSTGRESQL.format(flag="listed_by_cited", values="false, true"),
)
INSERT_TERM = statement("INSERT INTO doc_freq (term_id, term, df) VALUES (?, ?, 0)")
ADD_DF = statement("UPDATE doc_freq SET df = df + ? WHERE term_id = ?")
# Sent as COPY on PostgreSQL (retrieval.store.postgres.write).
INSERT_TERM_FREQ = statement("INSERT INTO term_freq (term_id, doc_id, count) VALUES (?, ?, ?)")
DELETE_POSTING = statement("DELETE FROM term_freq WHERE term_id = ? AND doc_id = ?")
DELETE_TERM = statement("DELETE FROM doc_freq WHERE term_id = ?")
VOCABULARY_SQL = statement("SELECT term, term_id FROM doc_freq")
LAST_DOC_ID_SQL = statement("SELECT max(doc_id) FROM doc_len")
INFO_SQL = statement("SELECT key, value FROM index_info")

# A list parameter is JSON text on both dialects (``Dialect.values``); a distributed table is asked by ``any_of``, a
# condition a sharded coordinator sends to the shards. Ids are ordered by their bytes.
EXISTING_SQL = statement(lambda d: f"SELECT id FROM papers WHERE id {d.any_of('ids')} ORDER BY id{d.bytes_order}")
REMOVED_TEXT_SQL = statement(
    lambda d: (
        "SELECT p.id, p.title, p.abstract, l.doc_id FROM papers AS p JOIN doc_len AS l ON l.paper_id = p.id "
        f"WHERE p.id {d.any_of('ids')} AND l.paper_id {d.any_of('ids')}"  # each table asked for the ids alone
    )
)
GONE_TERMS_SQL = statement(
    lambda d: f"SELECT term_id, term FROM doc_freq WHERE df = 0 AND term_id IN ({d.values('t', 'integer')})"
)


def _key_in(d, column: str, param: str = "ids") -> str:
    """``column`` is the number (``paper_keys``) of one of the paper ids in the JSON list ``:param`` (``in_set``:
    on a sharded index the shards are sent the numbers, not asked for every citation)."""
    return d.in_set(column, f"SELECT k.key FROM paper_keys AS k WHERE k.paper_id IN ({d.values(param)})")


# The citations the removed papers are at either end of, by id: the in-degrees to recount and the numbers that
# may fall out of use.
TOUCHED_SQL = statement(
    lambda d: (
        f"""\
SELECT citing.paper_id,
       cited.paper_id
FROM citation_links AS l
JOIN paper_keys AS citing ON citing.key = l.citing_key
JOIN paper_keys AS cited ON cited.key = l.cited_key
WHERE {_key_in(d, "l.citing_key")}
   OR {_key_in(d, "l.cited_key")}"""
    )
)

# In-degrees of the given cited ids, recounted after their citation rows changed.
RECOUNT_STATEMENTS = [
    statement(lambda d: f"DELETE FROM cited_counts WHERE paper_id {d.any_of('ids')}"),
    statement(
        lambda d: (
            f"""INSERT INTO cited_counts (paper_id, cited_by)
SELECT k.paper_id, count(*)
FROM citation_links AS l
JOIN paper_keys AS k ON k.key = l.cited_key
WHERE {_key_in(d, "l.cited_key")}
GROUP BY k.paper_id"""
        )
    ),
]

REMOVE_STATEMENTS = [
    statement(lambda d: f"DELETE FROM doc_len WHERE paper_id {d.any_of('ids')}"),
    statement(lambda d: f"DELETE FROM paper_authors WHERE paper_id {d.any_of('ids')}"),
    statement(lambda d: f"DELETE FROM field_sources WHERE paper_id {d.any_of('ids')}"),
    DELETE_VECTORS,
    statement(lambda d: f"DELETE FROM papers WHERE id {d.any_of('ids')}"),
    # What the removed papers' own records declared goes; what other records declared stays (dangling).
    statement(lambda d: f"UPDATE citation_links SET listed_by_citing = {d.false} WHERE {_key_in(d, 'citing_key')}"),
    statement(lambda d: f"UPDATE citation_links SET listed_by_cited = {d.false} WHERE {_key_in(d, 'cited_key')}"),
    statement(
        lambda d: (
            f"""DELETE FROM citation_links
WHERE ({_key_in(d, "citing_key")} OR {_key_in(d, "cited_key")})
  AND NOT listed_by_citing
  AND NOT listed_by_cited"""
        )
    ),
]
# The numbers of the given ids that no citation uses any more.
DROP_UNUSED_KEYS = statement(
    lambda d: (
        f"""DELETE FROM paper_keys
WHERE paper_id IN ({d.values("ids")})
  AND NOT EXISTS (SELECT 1 FROM citation_links AS l WHERE l.citing_key = paper_keys.key)
  AND NOT EXISTS (SELECT 1 FROM citation_links AS l WHERE l.cited_key = paper_keys.key)"""
    )
)


def _batches(items: Iterable[Paper], size: int) -> Iterator[list[Paper]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


class IndexWriter:
    """Adds and removes papers on a connection inside the caller's transaction, keeping ``doc_freq``,
    ``term_freq``, ``postings``, ``doc_len`` and the corpus statistics (N, total tokens, years) exact."""

    def __init__(self, conn: sqlite3.Connection, summary: WriteSummary) -> None:
        self.conn = conn
        self.summary = summary
        self.cleaner = ReferenceCleaner()
        self.vocabulary: dict[str, int] = dict(conn.execute(VOCABULARY_SQL))
        self.next_term_id = max(self.vocabulary.values(), default=0) + 1
        self.next_doc_id = (conn.execute(LAST_DOC_ID_SQL).fetchone()[0] or 0) + 1
        info = dict(conn.execute(INFO_SQL))
        last_key = conn.execute(LAST_KEY_SQL).fetchone()[0] or 0
        if not isinstance(last_key, int):  # a text typed into a number's column by hand (SQLite keeps it)
            where = summary.path
            raise NotAnIndexError(
                f"{where} is damaged: paper_keys or citation_links holds {quoted(str(last_key))} where a number "
                f"belongs; nothing was changed: `retrieval check --db {where}` reports every problem, "
                f"`{build_command(where, info)}` rebuilds it"
            )
        self.next_key = last_key + 1
        self.n_papers = int(info.get("n_papers", 0))
        self.total_tokens = int(info.get("total_tokens", 0))
        self.analyser = Analyser.from_info(info)  # the index's own: what it was built with, never the default
        self.info = info
        self._encoder: embed.Encoder | None | bool = False  # the index's semantic model, loaded by the first add
        # What the postings BLOBs must follow at the end (retrieval.store.postings): the papers removed from
        # each term's list (those there before this transaction) and the terms that gained papers.
        self.first_new_doc = self.next_doc_id
        self.removed_postings: dict[int, set[int]] = {}
        self.added_terms: set[int] = set()

    # -- adding -------------------------------------------------------------------------------------------
    def add(
        self, papers: Iterable[Paper], replace: bool = False, progress: Callable[[int], None] | None = None
    ) -> None:
        """Add ``papers``; an id already in the index is an error unless ``replace``, which swaps the record."""
        unique = UniqueIds()
        done = 0
        batches = _batches(papers, _BATCH)
        for chunk in batches:
            ids = [p.id for p in chunk]
            for pid in ids:
                unique.add(pid)
            existing = self._existing(ids)
            if existing and not replace:
                for rest in batches:  # the count is of every paper given, not of this batch's
                    existing += self._existing([p.id for p in rest])
                shown = ", ".join(repr(pid) for pid in existing[:5]) + (" ..." if len(existing) > 5 else "")
                raise InputError(
                    f"{len(existing):,} paper(s) already in the index ({shown}): pass --replace to overwrite them, "
                    "or remove them first with `retrieval remove`"
                )
            if existing:
                self.remove(existing)
                self.summary.replaced += len(existing)
            self._flush(self._rows(chunk))
            done += len(chunk)
            self.summary.added += len(chunk)
            if progress:
                progress(done)

    def _existing(self, ids: list[str]) -> list[str]:
        return [row[0] for row in self.conn.execute(EXISTING_SQL, {"ids": json.dumps(ids)})]

    def _rows(self, chunk: list[Paper]) -> _Batch:
        batch = _Batch()
        for paper in chunk:
            add_paper_rows(paper, batch.papers, batch.authors, batch.sources)
            batch.references.extend((paper.id, ref) for ref in self.cleaner.clean(paper.id, paper.references))
            batch.cited_by.extend((citer, paper.id) for citer in self.cleaner.clean(paper.id, paper.citations))
            tokens = self.analyser.analyse(paper.text)
            doc_id = self.next_doc_id
            self.next_doc_id += 1
            for term, count in Counter(tokens).items():
                term_id = self.vocabulary.get(term)
                if term_id is None:
                    term_id = self.vocabulary[term] = self.next_term_id
                    self.next_term_id += 1
                    batch.new_terms.append((term_id, term))
                batch.df_delta[term_id] += 1
                batch.term_freq.append((term_id, doc_id, count))
            batch.doc_len.append((doc_id, paper.id, len(tokens)))
            self.total_tokens += len(tokens)
            self.n_papers += 1
        return batch

    def _vectors_of(self, papers: list[tuple]) -> list[tuple[str, bytes]]:
        """``paper_vectors`` rows for the ``papers`` rows, when the index keeps vectors (made by the model it names:
        a ``ConfigError`` before anything is written when that model is not installed)."""
        if self._encoder is False:
            self._encoder = embed.of_index(self.info)
        if self._encoder is None or not papers:
            return []
        return encode_rows(self._encoder, [(row[0], row[1], row[2]) for row in papers])

    def _flush(self, batch: _Batch) -> None:
        conn = self.conn
        vectors = self._vectors_of(batch.papers)
        conn.executemany(INSERT_PAPER, batch.papers)
        conn.executemany(INSERT_AUTHOR, batch.authors)
        conn.executemany(INSERT_SOURCE, batch.sources)
        conn.executemany(INSERT_VECTOR, vectors)
        keys = self._keys({pid for edge in batch.references + batch.cited_by for pid in edge})
        conn.executemany(UPSERT_REFERENCE, ((keys[a], keys[b]) for a, b in batch.references))
        conn.executemany(UPSERT_CITED_BY, ((keys[a], keys[b]) for a, b in batch.cited_by))
        self._recount({cited for _, cited in batch.references} | {cited for _, cited in batch.cited_by})
        conn.executemany(INSERT_TERM, batch.new_terms)
        conn.executemany(ADD_DF, ((delta, term_id) for term_id, delta in batch.df_delta.items()))
        conn.executemany(INSERT_DOC_LEN, batch.doc_len)  # before the postings that refer to it (a foreign key)
        conn.executemany(INSERT_TERM_FREQ, batch.term_freq)
        self.added_terms.update(batch.df_delta)

    def _keys(self, ids: set[str]) -> dict[str, int]:
        """The numbers of ``ids`` in ``paper_keys``, those it lacks numbered now."""
        if not ids:
            return {}
        keys = dict(self.conn.execute(KEYS_SQL, {"ids": json.dumps(sorted(ids))}).fetchall())
        new = []
        for pid in sorted(ids - keys.keys()):
            keys[pid] = self.next_key
            new.append((self.next_key, pid))
            self.next_key += 1
        self.conn.executemany(INSERT_KEY, new)
        return keys

    # -- removing -----------------------------------------------------------------------------------------
    def remove(self, ids: list[str]) -> None:
        """Remove the papers ``ids`` (all must be in the index) with their postings and what their records
        declared. Postings are found by re-analysing the stored text, which is what was indexed."""
        rows = self.conn.execute(REMOVED_TEXT_SQL, {"ids": json.dumps(ids)}).fetchall()
        missing = sorted(set(ids) - {row[0] for row in rows})
        if missing:
            shown = ", ".join(repr(pid) for pid in missing[:5]) + (" ..." if len(missing) > 5 else "")
            raise InputError(f"{len(missing)} paper(s) not in the index ({shown}): nothing was removed")
        postings: list[tuple[int, int]] = []
        df_delta: Counter[int] = Counter()
        for pid, title, abstract, doc_id in rows:
            tokens = self.analyser.analyse(f"{title} {abstract}")
            for term in dict.fromkeys(tokens):  # in the text's order: a message names its first unknown term
                term_id = self.vocabulary.get(term)
                if term_id is None:  # the stored text was changed after it was indexed (by hand)
                    where = self.summary.path
                    raise NotAnIndexError(
                        f"{where} is damaged: the stored title or abstract of {quoted(pid)} holds the term "
                        f"{quoted(term)}, which the index's terms lack (its text was changed after it was indexed), "
                        f"so its postings cannot be found: nothing was changed; rebuild it with "
                        f"`{build_command(where, self.analyser.info())}`"
                    )
                postings.append((term_id, doc_id))
                df_delta[term_id] += 1
                if doc_id < self.first_new_doc:  # a paper added in this transaction is not in the BLOBs yet
                    self.removed_postings.setdefault(term_id, set()).add(doc_id)
            self.total_tokens -= len(tokens)
            self.n_papers -= 1
        conn = self.conn
        conn.executemany(DELETE_POSTING, postings)
        conn.executemany(ADD_DF, ((-delta, term_id) for term_id, delta in df_delta.items()))
        gone = conn.execute(GONE_TERMS_SQL, {"t": json.dumps(list(df_delta))}).fetchall()
        conn.executemany(DELETE_TERM, ((term_id,) for term_id, _ in gone))
        for _, term in gone:
            del self.vocabulary[term]
        removed = [row[0] for row in rows]
        params = {"ids": json.dumps(removed)}
        touched = conn.execute(TOUCHED_SQL, params).fetchall()
        for sql in REMOVE_STATEMENTS:
            conn.execute(sql, params)
        ends = {pid for edge in touched for pid in edge}
        if ends:
            conn.execute(DROP_UNUSED_KEYS, {"ids": json.dumps(sorted(ends))})
        self._recount({cited for _, cited in touched})
        self.summary.removed += len(rows)

    def _recount(self, cited_ids) -> None:
        if cited_ids:
            params = {"ids": json.dumps(sorted(cited_ids))}
            for sql in RECOUNT_STATEMENTS:
                self.conn.execute(sql, params)

    # -- statistics -----------------------------------------------------------------------------------------
    def finish(self) -> None:
        """Bring the postings BLOBs in line, write the corpus statistics and fill in the summary (see
        ``rows.write_statistics``)."""
        if self.n_papers == 0:  # checked once every change is made: a replace removes, then adds
            where = self.summary.path
            raise InputError(
                f"removing {self.summary.removed:,} paper(s) would leave {where} with none, and an index holds at "
                f"least one: nothing was removed; delete the index to drop it whole, or rebuild it from another "
                f"corpus (`retrieval build --from FILE --db {where}`)"
            )
        if not (self.summary.added or self.summary.removed):  # nothing changed (an empty file): nothing written,
            self.summary.papers = self.n_papers  # so what readers keep of this state stays theirs
            self.summary.terms, postings = self.conn.execute(TERM_TOTALS_SQL).fetchone()
            self.summary.postings = postings or 0
            return
        try:
            sync_postings(self.conn, self.first_new_doc, self.removed_postings, self.added_terms)
        except DamagedChunk as exc:  # a row changed by hand: said as a search says it, and nothing is written
            where = self.summary.path
            raise NotAnIndexError(
                f"{where} is damaged: {exc}; nothing was changed: `retrieval check --db {where}` reports every "
                f"problem, and `{build_command(where, self.analyser.info())}` rebuilds it"
            ) from None
        self.cleaner.count_into(self.summary)
        counts = CorpusCounts(self.n_papers, self.total_tokens)
        write_statistics(self.conn, counts, self.summary)


def _update(where: str | os.PathLike[str] | Backend, change: Callable[[IndexWriter], None]) -> WriteSummary:
    """Run ``change`` on the index at ``where`` in one write transaction under the writers' lock (on a server:
    ``retrieval.store.postgres.write``, writers wait for each other, readers never wait); on any error nothing is
    changed."""
    backend = backend_of(where)
    started = time.perf_counter()
    summary = WriteSummary(path=backend.shown)
    upgraded: list[tuple[str, str]] = []
    with backend.write_transaction(_BUSY_TIMEOUT_MS, "write to", writer=True, upgraded=upgraded) as conn:
        writer = IndexWriter(conn, summary)
        change(writer)
        writer.finish()
    if upgraded and upgraded[0][0] != upgraded[0][1]:
        summary.upgraded_from = upgraded[0][0]
    summary.seconds = time.perf_counter() - started
    return summary


def add_papers(
    papers: Iterable[Paper],
    path: str | os.PathLike[str] | DatabaseURL,
    *,
    replace: bool = False,
    progress: Callable[[int], None] | None = None,
) -> WriteSummary:
    """Add ``papers`` to the index at ``path`` (a file, or a ``DatabaseURL``: PostgreSQL) in one transaction
    (``replace`` overwrites existing ids).

    Cost is proportional to the papers added, not to the index. References from earlier papers to an added
    paper become live edges at once.
    """
    return _update(path, lambda writer: writer.add(papers, replace=replace, progress=progress))


def remove_papers(ids: Iterable[str], path: str | os.PathLike[str] | DatabaseURL) -> WriteSummary:
    """Remove the papers ``ids`` and their edges from the index at ``path`` in one transaction.

    References that other papers make to a removed paper stay as dangling references, as they would in a
    rebuild without it.
    """
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        raise InputError("no paper ids given: name the papers to remove")
    return _update(path, lambda writer: writer.remove(wanted))
