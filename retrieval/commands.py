"""The commands as library functions: ``build``, ``add``, ``remove``, ``upgrade``, ``search``, ``stats``. The CLI
only parses and prints. Building an index from the lesson's two mock clients lives here too, so that
``RetrievalClient`` only ever reads."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from .config import RetrievalConfig, resolve_db_path
from .errors import InputError
from .search.client import RetrievalClient
from .store.database import check_index, connect, edge_counts

# The writers, the readers and the demo corpus are imported by the commands that use them, so that a process
# that only searches does not pay for their imports (bench/cli_start.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .corpus.mock import ArxivMockClient, SemanticScholarMockClient
    from .search.blend import RetrievalResult
    from .store.executor import Tracer
    from .store.progress import BuildProgress
    from .store.rows import WriteSummary

BUILTIN = "built-in demo corpus"


def _corpus_file(source: str | os.PathLike[str]) -> Path:
    src = Path(source)
    if not src.is_file():
        raise InputError(f"no corpus file at {src}: give a file of papers (JSONL, OpenAlex or S2 lines)")
    return src


def build(
    db: str | os.PathLike[str] | None = None,
    source: str | os.PathLike[str] | None = None,
    progress: BuildProgress | Callable[[int], None] | None = None,
    format: str | None = None,
    workers: int | None = None,
) -> WriteSummary:
    """Build the index at ``db`` (resolved as everywhere) from the corpus file ``source`` (``format`` jsonl,
    openalex or s2; detected when None), or from the built-in demo corpus when ``source`` is None, with
    ``workers`` tokenising processes (see ``build_index``, which says what ``progress`` is told). Replaces an
    existing index only when the build succeeds."""
    from .corpus.jsonl import PaperFile
    from .corpus.mock import ArxivMockClient, SemanticScholarMockClient, build_corpus, merge_clients
    from .store.build import build_index

    path = resolve_db_path(db)
    if source is None:
        corpus = build_corpus()
        papers = merge_clients(ArxivMockClient(corpus), SemanticScholarMockClient(corpus))
        return build_index(papers, path, source=BUILTIN, progress=progress, workers=workers)
    src = _corpus_file(source)
    return build_index(PaperFile(src, format), path, source=src.name, progress=progress, workers=workers)


def add(
    source: str | os.PathLike[str],
    db: str | os.PathLike[str] | None = None,
    replace: bool = False,
    progress: Callable[[int], None] | None = None,
    format: str | None = None,
) -> WriteSummary:
    """Add the papers of ``source`` to the index at ``db`` in one transaction; an id already there is an error
    unless ``replace``. Statistics stay exact: the index equals a rebuild from the new corpus."""
    from .corpus.jsonl import read_papers
    from .store.writer import add_papers

    path = resolve_db_path(db)
    src = _corpus_file(source)
    return add_papers((p for _, p in read_papers(src, format)), path, replace=replace, progress=progress)


def remove(ids: list[str], db: str | os.PathLike[str] | None = None) -> WriteSummary:
    """Remove the papers ``ids`` and their edges from the index at ``db`` in one transaction."""
    from .store.writer import remove_papers

    return remove_papers(ids, resolve_db_path(db))


def upgrade(db: str | os.PathLike[str] | None = None) -> tuple[str, str]:
    """Upgrade the index at ``db`` to this version's schema revision; ``(before, after)``. Atomic: the old file
    stays as it was if the upgrade fails."""
    from .store.migrate import upgrade_index

    return upgrade_index(resolve_db_path(db))


def search(
    query: str,
    db: str | os.PathLike[str] | None = None,
    config: RetrievalConfig | None = None,
    limit: int | None = 10,
    tracer: Tracer | None = None,
) -> RetrievalResult:
    """Search the index at ``db``; see ``RetrievalClient.search``. ``tracer`` sees every statement that runs."""
    with RetrievalClient(db, config, tracer=tracer) as client:
        return client.search(query, limit=limit)


def build_from_clients(
    arxiv: ArxivMockClient, s2: SemanticScholarMockClient, db: str | os.PathLike[str] | None = None
) -> Path:
    """Build the index at ``db`` from the two mock clients' records merged by id (``merge_records``), unless
    it exists already; returns its path. The lesson's ``RetrievalClient(arxiv, s2)`` is this, then a client."""
    from .corpus.mock import merge_clients
    from .store.build import build_index

    path = resolve_db_path(db)
    if not path.exists():
        build_index(merge_clients(arxiv, s2), path, source="mock clients")
    return path


def build_client(config: RetrievalConfig | None = None, db: str | os.PathLike[str] | None = None) -> RetrievalClient:
    """A client over the built-in demo corpus, building its index at ``db`` on first use."""
    from .corpus.mock import ArxivMockClient, SemanticScholarMockClient, build_corpus

    corpus = build_corpus()
    path = build_from_clients(ArxivMockClient(corpus), SemanticScholarMockClient(corpus), db)
    return RetrievalClient(path, config)


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
