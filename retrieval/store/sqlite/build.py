"""The full build: a new index file from a stream of papers, written beside the target and swapped in whole."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path

from ... import embed
from ...bm25 import K1, B
from ...corpus.paper import Paper
from ...text import DEFAULT_STEM, DEFAULT_STOPWORDS, Analyser
from ..database import HEAD_REVISION, store_error
from ..progress import STATISTICS, SWAP, VECTORS, BuildProgress, as_progress, phase
from ..rows import WriteSummary, write_statistics
from ..schema.migrate import migrate
from ..vectors import write_all as write_vectors
from .files import TempIndex, check_replaceable, refresh_planner_statistics, swap_in


def build_index(
    papers: Iterable[Paper],
    path: str | os.PathLike[str],
    *,
    source: str = "",
    progress: BuildProgress | Callable[[int], None] | None = None,
    workers: int | None = None,
    stem: str | None = DEFAULT_STEM,
    stopwords: str | None = DEFAULT_STOPWORDS,
    semantic: str | None = None,
) -> WriteSummary:
    """Index ``papers`` into a new file at ``path`` (Okapi BM25 statistics with k1=1.5, b=0.75).

    The papers are streamed once; ``workers`` processes tokenise them (default: up to two, one per core; 0 or
    1 keeps everything in this process), and the postings are sorted in memory and loaded in key order
    (``retrieval.store.sqlite.bulk``). Everything is written into a temporary file beside ``path``, which replaces
    ``path`` only when the build has succeeded: an error (a bad record, a full disk, Ctrl-C) leaves any
    previous index as it was. References to papers outside the corpus are kept as dangling references;
    self-citations and repeated references are dropped and counted. The new file is in WAL mode, so readers
    keep answering while a later ``add`` writes.

    ``progress`` is told how the build goes: a ``BuildProgress`` (``retrieval.store.progress``) sees every
    phase start, advance and finish (``retrieval build`` draws them); a plain callable is called with the number
    of papers read so far.

    ``stem`` (a Snowball stemmer of PyStemmer, e.g. ``"english"``) and ``stopwords`` (``"english"``: Lucene's 33
    English stop words) choose the index's ``retrieval.text.Analyser``: neither by default
    (``retrieval.text.DEFAULT_STEM``, ``DEFAULT_STOPWORDS``; None or ``"none"`` asks for none). The index records
    them, and every later add and query is analysed the same way.

    ``semantic`` (a model of ``retrieval.embed.MODELS``: ``"wordllama"``) also encodes every paper's title and
    abstract into ``paper_vectors`` for the semantic signal; the index records the model, and every later add
    encodes with it. ``"auto"`` (``retrieval build``'s default) encodes with ``embed.AUTO_MODEL`` only where the
    corpus's citations are sparse and its package is installed (``embed.auto_encoder``), decided once the papers
    are read. None or ``"none"`` (this function's default) encodes nothing.
    """
    target = Path(path)
    analyser = Analyser(stem, stopwords)  # an unknown name is a ConfigError before anything is written
    semantic = embed.requested(semantic)
    encoder = embed.encoder(semantic) if semantic and semantic != embed.AUTO else semantic  # a missing model too
    try:
        return _build(papers, target, source, progress, workers, analyser, encoder)
    except (OSError, sqlite3.Error) as exc:  # a full disk, a read-only folder: a message, the old index intact
        raise store_error(exc, target, "write") from None


def _build(papers, target: Path, source: str, progress, workers, analyser: Analyser, encoder) -> WriteSummary:
    started = time.perf_counter()
    report = as_progress(progress)
    expected = check_replaceable(target)
    temp = TempIndex(target, ".building")
    tmp = temp.path
    summary = WriteSummary(path=str(target))
    try:
        try:
            migrate(tmp)
        except Exception as exc:  # SQLAlchemy's wrapper of SQLite's own error (a full disk): said as a build says it
            if isinstance(getattr(exc, "orig", None), sqlite3.Error):
                raise exc.orig from None
            raise
        conn = sqlite3.connect(tmp, isolation_level=None, check_same_thread=False)  # the loader's indexer thread
        try:
            # The temporary file is thrown away on failure, so the build needs no journal of its own.
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("PRAGMA synchronous = OFF")
            conn.execute("BEGIN")
            from .bulk import BulkLoader  # numpy and multiprocessing: loaded by a build only

            loaded = BulkLoader(conn, workers, report, analyser).load(papers)
            summary.added = loaded.papers
            summary.stages.update(loaded.stages)
            loaded.cleaner.count_into(summary)
            summary.edges, summary.dangling_references = loaded.edges, loaded.dangling
            mark = time.perf_counter()
            if encoder == embed.AUTO:
                encoder, note = embed.auto_encoder(loaded.papers, loaded.edges)
                summary.notes.extend([note] if note else [])
            if encoder is not None:
                with phase(report, VECTORS, loaded.papers, "papers"):
                    write_vectors(conn, encoder, report.update)
                summary.stages["vectors"] = time.perf_counter() - mark
                summary.semantic = encoder.name
                mark = time.perf_counter()
            extra = {
                "k1": K1,
                "b": B,
                **analyser.info(),
                **(encoder.info() if encoder is not None else {}),
                "schema_revision": HEAD_REVISION,
                "source": source,
                "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "build_seconds": round(time.perf_counter() - started, 3),
            }
            with phase(report, STATISTICS, conn=conn):
                write_statistics(conn, loaded.counts, summary, extra)
                conn.execute("COMMIT")
                summary.stages["statistics"] = time.perf_counter() - mark
                mark = time.perf_counter()
                refresh_planner_statistics(conn, force=True)
                summary.stages["analyze"] = time.perf_counter() - mark
            mark = time.perf_counter()
            with phase(report, SWAP):
                conn.execute("PRAGMA journal_mode = WAL")
                conn.close()
                swap_in(tmp, target, expected)
            summary.stages["swap"] = time.perf_counter() - mark
        finally:
            conn.close()
    except BaseException:
        temp.discard()
        raise
    finally:
        temp.close()
    summary.seconds = time.perf_counter() - started
    return summary
