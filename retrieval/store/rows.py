"""What both writers (the bulk build and the incremental writer) put into an index: the rows of a paper, its
cleaned reference lists, the corpus statistics, and the summary a write returns."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from ..corpus.names import name_key
from ..corpus.paper import Paper
from ..errors import InputError
from .database import SEAL_KEY, edge_counts, seal
from .sql.dialect import statement

# The same text on both backends (the plain inserts are sent as COPY on PostgreSQL: retrieval.store.postgres.write).
INSERT_PAPER = statement("INSERT INTO papers (id, title, abstract, year, source) VALUES (?, ?, ?, ?, ?)")
INSERT_AUTHOR = statement(
    "INSERT INTO paper_authors (paper_id, position, name, surname, name_key) VALUES (?, ?, ?, ?, ?)"
)
INSERT_SOURCE = statement("INSERT INTO field_sources (paper_id, field, source) VALUES (?, ?, ?)")
INSERT_DOC_LEN = statement("INSERT INTO doc_len (doc_id, paper_id, length) VALUES (?, ?, ?)")
UPSERT_INFO = statement(
    "INSERT INTO index_info (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
YEARS_SQL = statement("SELECT min(year), max(year) FROM papers")
INFO_SQL = statement("SELECT key, value FROM index_info")
# What the statistics count, from the tables (whole-table reads: an upgrade's and ``retrieval check``'s, not an
# add's, whose cost follows its size).
TABLE_TOTALS_SQL = statement("""\
SELECT (SELECT count(*) FROM doc_len) AS n_papers,
       (SELECT sum(length) FROM doc_len) AS total_tokens,
       (SELECT min(year) FROM papers) AS min_year,
       (SELECT max(year) FROM papers) AS max_year""")
TERM_TOTALS_SQL = statement("SELECT count(*), sum(df) FROM doc_freq")


@dataclass
class WriteSummary:
    """What one build, add or remove did: the closing summary the CLI prints."""

    path: str
    papers: int = 0  # papers in the index afterwards
    added: int = 0
    replaced: int = 0
    removed: int = 0
    edges: int | None = None  # live citation edges afterwards (both ends are papers); counted by a build
    dangling_references: int | None = None  # citation rows with an end outside the corpus; counted by a build
    self_citations_dropped: int = 0
    duplicate_references_dropped: int = 0
    terms: int = 0
    postings: int = 0
    seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)  # seconds per stage of a bulk build
    shards: list[dict] | None = None  # a sharded build: each shard's URL (password hidden) and rows per table
    semantic: str | None = None  # a build: the model whose text vectors it wrote (None: none)
    notes: list[str] = field(default_factory=list)  # a build: what the user may want to do (not a problem)
    warnings: list[str] = field(default_factory=list)  # what went wrong after the index was safely written
    upgraded_from: str | None = None  # an add or remove that first upgraded the index: its revision before

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ReferenceCleaner:
    """Drops a paper's citations of itself and repeated ids from its reference lists, counting both."""

    self_citations: int = 0
    duplicates: int = 0

    def clean(self, pid: str, ids: Iterable[str]) -> list[str]:
        """``ids`` without ``pid`` itself and without repeats, in their first order."""
        out: list[str] = []
        seen: set[str] = set()
        for other in ids:
            if other == pid:
                self.self_citations += 1
            elif other in seen:
                self.duplicates += 1
            else:
                seen.add(other)
                out.append(other)
        return out

    def count_into(self, summary: WriteSummary) -> None:
        summary.self_citations_dropped += self.self_citations
        summary.duplicate_references_dropped += self.duplicates


class UniqueIds:
    """Refuses a paper id seen before in the same input (the readers report file:line; this guards the API)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def add(self, pid: str) -> None:
        if pid in self.seen:
            raise InputError(f"paper {pid!r} appears twice in the input: each paper may appear once")
        self.seen.add(pid)


def add_paper_rows(paper: Paper, papers: list, authors: list, sources: list) -> None:
    """Append ``paper``'s rows for ``papers``, ``paper_authors`` and ``field_sources``."""
    papers.append((paper.id, paper.title, paper.abstract or "", paper.year, paper.source))
    authors.extend((paper.id, i, name, *name_key(name)) for i, name in enumerate(paper.authors))
    sources.extend((paper.id, name, src) for name, src in sorted(paper.field_sources.items()))


@dataclass(frozen=True)
class CorpusCounts:
    """The corpus statistics a write leaves behind: N and the total tokens."""

    n_papers: int
    total_tokens: int


def renew_generation(conn: sqlite3.Connection) -> None:
    """A new ``index_info.generation``: what readers kept of the index before is not used again."""
    conn.execute(UPSERT_INFO, ("generation", uuid.uuid4().hex))


def write_seal(conn: sqlite3.Connection) -> None:
    """Seal the statistics ``index_info`` holds now (``retrieval.store.database.seal``), in the caller's
    transaction: a writer calls it after its last change to them."""
    info = {key: value for key, value in conn.execute(INFO_SQL).fetchall()}
    conn.execute(UPSERT_INFO, (SEAL_KEY, seal(info)))


def statistics_disagreeing(info: dict[str, str], totals: tuple) -> dict[str, tuple]:
    """The statistics of ``info`` that the tables give otherwise (``totals``: ``TABLE_TOTALS_SQL``'s row): key ->
    (stored, counted)."""
    n, tokens, low, high = totals
    counted = {
        "n_papers": n,
        "total_tokens": 0 if tokens is None else tokens,
        "min_year": "" if low is None else low,
        "max_year": "" if high is None else high,
    }
    return {key: (info.get(key), value) for key, value in counted.items() if str(info.get(key)) != str(value)}


def seal_if_true(conn: sqlite3.Connection) -> bool:
    """Seal the statistics of ``index_info`` (an index an older version wrote, being upgraded) if the tables give
    the same; else leave them unsealed (``retrieval check`` reports them). Whole-table reads: an upgrade's."""
    info = {key: value for key, value in conn.execute(INFO_SQL).fetchall()}
    if statistics_disagreeing(info, conn.execute(TABLE_TOTALS_SQL).fetchone()):
        return False
    write_seal(conn)
    return True


def write_statistics(
    conn: sqlite3.Connection,
    counts: CorpusCounts,
    summary: WriteSummary,
    extra: dict | None = None,
    count_edges: bool = False,
) -> None:
    """Write N, total tokens, avgdl and the year range to ``index_info``, seal them (``write_seal``), and fill in
    ``summary``.

    ``count_edges`` also counts live and dangling edges, a scan of ``citations`` that a build can afford and
    an add, whose cost should follow its size, leaves to ``retrieval stats``."""
    if counts.n_papers == 0:
        source = (extra or {}).get("source")
        if source:
            raise InputError(f"{source} holds no papers: nothing to index; check the file (a paper per line)")
        raise InputError("the index would hold no papers: nothing to index (check the input)")
    lo, hi = conn.execute(YEARS_SQL).fetchone()
    info = {
        "n_papers": counts.n_papers,
        "total_tokens": counts.total_tokens,
        "avgdl": counts.total_tokens / counts.n_papers,
        "min_year": "" if lo is None else lo,
        "max_year": "" if hi is None else hi,
        "updated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        # Renewed by every write: what a reader keeps of the index (decoded postings) is kept for one generation.
        "generation": uuid.uuid4().hex,
        **(extra or {}),
    }
    conn.executemany(
        UPSERT_INFO, ((key, repr(value) if isinstance(value, float) else str(value)) for key, value in info.items())
    )
    write_seal(conn)
    summary.papers = counts.n_papers
    if count_edges:
        summary.edges, summary.dangling_references = edge_counts(conn)
    summary.terms, postings = conn.execute(TERM_TOTALS_SQL).fetchone()
    summary.postings = postings or 0
