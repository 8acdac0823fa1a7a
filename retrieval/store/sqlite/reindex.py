"""Re-indexing an index's text in place: the postings, the vocabulary and the lengths made again from the papers'
stored titles and abstracts, for an index written by an older tokeniser (``retrieval upgrade``).

Only ``term_freq``, ``doc_freq``, ``doc_len`` and the statistics of ``index_info`` change; papers, authors,
citations, saved evidence runs and everything else stay as they are. It runs on the temporary copy that
``retrieval.store.schema.migrate.upgrade_index`` makes and swaps in whole, so it has the build's atomicity:
killed at any point, the index is as it was. The postings are made exactly as a build makes them
(``BulkLoader.reindex``): the result equals a fresh build of the same papers with the same analyser, but for the
surrogate term and document numbers (documents are numbered again 1..N in their old order).
"""

from __future__ import annotations

import sqlite3
import time

from ...text import Analyser
from ..progress import BuildProgress
from ..rows import CorpusCounts, WriteSummary, write_statistics
from .files import refresh_planner_statistics

# The documents in their present order, kept in a temporary table while doc_len is emptied and filled again.
SAVE_ORDER = "CREATE TEMP TABLE reindex_order AS SELECT doc_id, paper_id FROM doc_len"
DOCUMENTS_SQL = """\
SELECT o.paper_id,
       coalesce(p.title, '') || ' ' || coalesce(p.abstract, '')
FROM temp.reindex_order AS o
JOIN papers AS p ON p.id = o.paper_id
ORDER BY o.doc_id"""
CLEAR = ("DELETE FROM postings", "DELETE FROM term_freq", "DELETE FROM doc_freq", "DELETE FROM doc_len")


def reindex(
    conn: sqlite3.Connection,
    analyser: Analyser | None = None,
    *,
    workers: int | None = None,
    progress: BuildProgress | None = None,
) -> WriteSummary:
    """Re-analyse every paper of the index on ``conn`` with ``analyser`` (default: the stemmer and stop words
    its ``index_info`` names, with this version's tokeniser) and write its postings, vocabulary, lengths and
    statistics again, in one transaction. ``conn`` must be a connection (isolation_level None) to a file that
    nothing else uses: its journal is turned off, as a build's temporary file's is, and it is vacuumed after.
    """
    from .bulk import BulkLoader  # numpy and multiprocessing: loaded by a re-index only

    started = time.perf_counter()
    info = dict(conn.execute("SELECT key, value FROM index_info"))
    analyser = analyser if analyser is not None else Analyser.from_info(info)
    summary = WriteSummary(path="")
    conn.execute("PRAGMA journal_mode = OFF")  # the copy is thrown away on failure: no journal needed
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    try:
        conn.execute("DROP TABLE IF EXISTS temp.reindex_order")
        conn.execute(SAVE_ORDER)
        for sql in CLEAR:
            conn.execute(sql)
        loader = BulkLoader(conn, workers, progress or BuildProgress(), analyser)
        counts: CorpusCounts = loader.reindex(lambda: conn.execute(DOCUMENTS_SQL))
        conn.execute("DROP TABLE temp.reindex_order")
        write_statistics(conn, counts, summary, analyser.info())
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("VACUUM")  # the old postings' pages, freed, are not kept in the file
    refresh_planner_statistics(conn, force=True)
    summary.seconds = time.perf_counter() - started
    return summary
