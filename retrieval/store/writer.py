"""Writing an index: one streaming pass over the papers, into a temporary file renamed over the target.

A failed or interrupted build removes its temporary file and leaves any previous index untouched.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..corpus.paper import Paper
from ..errors import RetrievalError
from ..text import TOKENISER_NAME, TOKENISER_VERSION, tokenise
from .database import HEAD_REVISION, migrate

K1 = 1.5
B = 0.75
_BATCH = 2000


@dataclass(frozen=True)
class BuildSummary:
    """What a build wrote: the closing summary the CLI prints."""

    papers: int
    edges: int
    dangling_references: int
    self_citations_dropped: int
    duplicate_references_dropped: int
    terms: int
    postings: int
    seconds: float
    path: str

    def to_dict(self) -> dict:
        return asdict(self)


class _Batch:
    """Rows waiting to be inserted, flushed every ``_BATCH`` papers with one ``executemany`` per table."""

    def __init__(self) -> None:
        self.papers: list[tuple] = []
        self.authors: list[tuple] = []
        self.citations: list[tuple] = []
        self.term_freq: list[tuple] = []
        self.doc_len: list[tuple] = []

    def flush(self, conn: sqlite3.Connection) -> None:
        conn.executemany("INSERT INTO papers (id, title, abstract, year, source) VALUES (?, ?, ?, ?, ?)", self.papers)
        conn.executemany("INSERT INTO paper_authors (paper_id, position, name) VALUES (?, ?, ?)", self.authors)
        conn.executemany("INSERT INTO citations (citing_id, cited_id) VALUES (?, ?)", self.citations)
        conn.executemany("INSERT INTO term_freq (term_id, paper_id, count) VALUES (?, ?, ?)", self.term_freq)
        conn.executemany("INSERT INTO doc_len (paper_id, length) VALUES (?, ?)", self.doc_len)
        self.__init__()


def _write(conn: sqlite3.Connection, papers: Iterable[Paper], progress: Callable[[int], None] | None) -> dict:
    vocabulary: dict[str, int] = {}
    doc_freq: Counter[int] = Counter()
    seen: set[str] = set()
    n = total_tokens = self_cites = duplicate_refs = 0
    years: list[int] = []
    batch = _Batch()
    for paper in papers:
        if paper.id in seen:
            raise RetrievalError(f"duplicate paper id {paper.id!r}: each paper may appear once")
        seen.add(paper.id)
        batch.papers.append((paper.id, paper.title, paper.abstract or "", paper.year, paper.source))
        batch.authors.extend((paper.id, i, name) for i, name in enumerate(paper.authors))
        cited: set[str] = set()
        for ref in paper.references:
            if ref == paper.id:
                self_cites += 1
            elif ref in cited:
                duplicate_refs += 1
            else:
                cited.add(ref)
                batch.citations.append((paper.id, ref))
        tokens = tokenise(paper.text)
        for term, count in Counter(tokens).items():
            term_id = vocabulary.get(term)
            if term_id is None:
                term_id = vocabulary[term] = len(vocabulary) + 1
            doc_freq[term_id] += 1
            batch.term_freq.append((term_id, paper.id, count))
        batch.doc_len.append((paper.id, len(tokens)))
        total_tokens += len(tokens)
        if paper.year is not None:
            years.append(paper.year)
        n += 1
        if n % _BATCH == 0:
            batch.flush(conn)
            if progress:
                progress(n)
    batch.flush(conn)
    if progress:
        progress(n)
    if n == 0:
        raise RetrievalError("the corpus holds no papers: nothing to index (check the input file)")
    conn.executemany(
        "INSERT INTO doc_freq (term_id, term, df) VALUES (?, ?, ?)",
        ((term_id, term, doc_freq[term_id]) for term, term_id in vocabulary.items()),
    )
    edges = conn.execute("SELECT count(*) FROM citations AS c JOIN papers AS p ON p.id = c.cited_id").fetchone()[0]
    n_citations = conn.execute("SELECT count(*) FROM citations").fetchone()[0]
    return {
        "n_papers": n,
        "total_tokens": total_tokens,
        "avgdl": total_tokens / n,
        "min_year": min(years) if years else "",
        "max_year": max(years) if years else "",
        "edges": edges,
        "dangling_references": n_citations - edges,
        "self_citations_dropped": self_cites,
        "duplicate_references_dropped": duplicate_refs,
        "terms": len(vocabulary),
        "postings": sum(doc_freq.values()),
    }


def build_index(
    papers: Iterable[Paper],
    path: str | os.PathLike[str],
    *,
    source: str = "",
    progress: Callable[[int], None] | None = None,
) -> BuildSummary:
    """Index ``papers`` into a new file at ``path`` (Okapi BM25 statistics with k1=1.5, b=0.75).

    The papers are streamed once. Everything is written into a temporary file beside ``path``, which replaces
    ``path`` only when the build has succeeded: an error (a bad record, a full disk, Ctrl-C) leaves any
    previous index as it was. References to papers outside the corpus are kept as dangling references;
    self-citations and repeated references are dropped and counted.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".building", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes the file private; an index is as readable as any new file
    try:
        migrate(tmp)
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            # The temporary file is thrown away on failure, so the build needs no journal of its own.
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("PRAGMA synchronous = OFF")
            conn.execute("BEGIN")
            stats = _write(conn, papers, progress)
            seconds = time.perf_counter() - started
            info = {
                **stats,
                "k1": K1,
                "b": B,
                "tokeniser": TOKENISER_NAME,
                "tokeniser_version": TOKENISER_VERSION,
                "schema_revision": HEAD_REVISION,
                "source": source,
                "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "build_seconds": round(seconds, 3),
            }
            conn.executemany(
                "INSERT INTO index_info (key, value) VALUES (?, ?)",
                ((key, repr(value) if isinstance(value, float) else str(value)) for key, value in info.items()),
            )
            conn.execute("COMMIT")
            conn.execute("ANALYZE")
            conn.execute("PRAGMA journal_mode = DELETE")
        finally:
            conn.close()
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return BuildSummary(
        papers=stats["n_papers"],
        edges=stats["edges"],
        dangling_references=stats["dangling_references"],
        self_citations_dropped=stats["self_citations_dropped"],
        duplicate_references_dropped=stats["duplicate_references_dropped"],
        terms=stats["terms"],
        postings=stats["postings"],
        seconds=time.perf_counter() - started,
        path=str(target),
    )
