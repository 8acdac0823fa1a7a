"""The commands as library functions: ``build``, ``search``, ``stats``. The CLI only parses and prints."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from .config import RetrievalConfig, resolve_db_path
from .corpus import ArxivMockClient, SemanticScholarMockClient, build_corpus, merge_clients, read_papers
from .errors import IndexNotFoundError
from .search.merge import RetrievalClient, RetrievalResult
from .store.database import check_index, connect, edge_counts
from .store.writer import WriteSummary, add_papers, build_index, remove_papers

BUILTIN = "built-in demo corpus"


def _corpus_file(source: str | os.PathLike[str]) -> Path:
    src = Path(source)
    if not src.is_file():
        raise IndexNotFoundError(f"no corpus file at {src}: give a file of papers (JSONL, OpenAlex or S2 lines)")
    return src


def build(
    db: str | os.PathLike[str] | None = None,
    source: str | os.PathLike[str] | None = None,
    progress: Callable[[int], None] | None = None,
    format: str | None = None,
    workers: int | None = None,
) -> WriteSummary:
    """Build the index at ``db`` (resolved as everywhere) from the corpus file ``source`` (``format`` jsonl,
    openalex or s2; detected when None), or from the built-in demo corpus when ``source`` is None, with
    ``workers`` tokenising processes (see ``build_index``). Replaces an existing index only when the build
    succeeds."""
    path = resolve_db_path(db)
    if source is None:
        corpus = build_corpus()
        papers = merge_clients(ArxivMockClient(corpus), SemanticScholarMockClient(corpus))
        return build_index(papers, path, source=BUILTIN, progress=progress, workers=workers)
    src = _corpus_file(source)
    papers = (p for _, p in read_papers(src, format))
    return build_index(papers, path, source=src.name, progress=progress, workers=workers)


def add(
    source: str | os.PathLike[str],
    db: str | os.PathLike[str] | None = None,
    replace: bool = False,
    progress: Callable[[int], None] | None = None,
    format: str | None = None,
) -> WriteSummary:
    """Add the papers of ``source`` to the index at ``db`` in one transaction; an id already there is an error
    unless ``replace``. Statistics stay exact: the index equals a rebuild from the new corpus."""
    path = resolve_db_path(db)
    src = _corpus_file(source)
    return add_papers((p for _, p in read_papers(src, format)), path, replace=replace, progress=progress)


def remove(ids: list[str], db: str | os.PathLike[str] | None = None) -> WriteSummary:
    """Remove the papers ``ids`` and their edges from the index at ``db`` in one transaction."""
    return remove_papers(ids, resolve_db_path(db))


def search(
    query: str,
    db: str | os.PathLike[str] | None = None,
    config: RetrievalConfig | None = None,
    limit: int | None = 10,
) -> RetrievalResult:
    """Search the index at ``db``; see ``RetrievalClient.search``."""
    with RetrievalClient(config=config, db=db) as client:
        return client.search(query, limit=limit)


def search_sql(query: str, db: str | os.PathLike[str] | None = None, config: RetrievalConfig | None = None):
    """The statements a search for ``query`` runs, with their parameters."""
    with RetrievalClient(config=config, db=db) as client:
        return client.search_sql(query)


STATS_SQL = """\
SELECT (SELECT count(*) FROM papers) AS papers,
       (SELECT count(*) FROM doc_freq) AS terms,
       (SELECT count(*) FROM term_freq) AS postings"""


def stats(db: str | os.PathLike[str] | None = None) -> dict:
    """What the index at ``db`` holds: papers, edges, terms, avgdl, years, schema revision, file size, ..."""
    path = resolve_db_path(db)
    info = check_index(path)
    conn = connect(path, readonly=True)
    try:
        conn.row_factory = sqlite3.Row
        row = conn.execute(STATS_SQL).fetchone()
        edges, dangling = edge_counts(conn)
    finally:
        conn.close()
    return {
        "path": str(path),
        "papers": row["papers"],
        "edges": edges,
        "dangling_references": dangling,
        "terms": row["terms"],
        "postings": row["postings"],
        "avgdl": info.avgdl,
        "min_year": info.min_year,
        "max_year": info.max_year,
        "k1": info.k1,
        "b": info.b,
        "tokeniser": f"{info.tokeniser} v{info.tokeniser_version}",
        "schema_revision": info.info.get("schema_revision"),
        "source": info.info.get("source"),
        "built_at": info.info.get("built_at"),
        "file_bytes": path.stat().st_size,
    }
