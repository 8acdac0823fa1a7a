"""The lexical pass: Okapi BM25 as one SQL aggregation over ``term_freq``, ``doc_freq`` and ``doc_len``.

Variant (Robertson/Sparck Jones idf with the +1 inside the log, as Lucene uses, so idf is never negative)::

    idf(t)     = ln(1 + (N - df + 0.5) / (df + 0.5))
    tf_norm    = f * (k1 + 1) / (f + k1 * (1 - b + b * dl / avgdl))
    score(d,q) = sum over the query's tokens of idf(t) * tf_norm(t, d)

with k1 = 1.5 and b = 0.75 read from the index, and N and avgdl read in the same transaction as the postings.
A token repeated in the query counts each time (``qtf``).
The SQL is returned by ``*_sql`` methods and run by the others, so ``retrieval search --sql`` shows exactly what
runs. The query's tokens travel as one JSON parameter, which keeps the statement fixed and parameterised.
"""

from __future__ import annotations

import json
import sqlite3

from ..store.database import read_snapshot, read_stats
from ..text import tokenise

_WEIGHTED_TERMS = """\
WITH query_terms AS (
    SELECT value AS term,
           count(*) AS qtf
    FROM json_each(:query_terms)
    GROUP BY value
),
weighted_terms AS (
    SELECT d.term_id,
           q.qtf * ln(1.0 + (:n_papers - d.df + 0.5) / (d.df + 0.5)) AS weight
    FROM query_terms AS q
    JOIN doc_freq AS d ON d.term = q.term
)"""

_SCORE = """\
sum(w.weight * tf.count * (:k1 + 1.0)
    / (tf.count + :k1 * (1.0 - :b + :b * dl.length / :avgdl))) AS score"""

TOP_K_SQL = f"""\
{_WEIGHTED_TERMS}
SELECT tf.paper_id,
       {_SCORE}
FROM weighted_terms AS w
JOIN term_freq AS tf ON tf.term_id = w.term_id
JOIN doc_len AS dl ON dl.paper_id = tf.paper_id
GROUP BY tf.paper_id
ORDER BY score DESC, tf.paper_id
LIMIT :k"""

SCORES_FOR_SQL = f"""\
{_WEIGHTED_TERMS},
candidates AS (
    SELECT value AS paper_id
    FROM json_each(:paper_ids)
)
SELECT tf.paper_id,
       {_SCORE}
FROM weighted_terms AS w
JOIN term_freq AS tf ON tf.term_id = w.term_id
JOIN candidates AS c ON c.paper_id = tf.paper_id
JOIN doc_len AS dl ON dl.paper_id = tf.paper_id
GROUP BY tf.paper_id
ORDER BY tf.paper_id"""


class BM25Index:
    """Okapi BM25 (k1=1.5, b=0.75, idf = ln(1 + (N - df + 0.5)/(df + 0.5))) over an index file."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def _params(self, terms: list[str]) -> dict:
        stats = read_stats(self._conn)
        return {
            "query_terms": json.dumps(terms),
            "n_papers": stats.n_papers,
            "avgdl": stats.avgdl,
            "k1": stats.k1,
            "b": stats.b,
        }

    def search_sql(self, query: str, top_k: int = 10) -> tuple[str, dict]:
        """The statement and parameters that rank the top ``top_k`` papers for ``query``."""
        return TOP_K_SQL, {**self._params(tokenise(query)), "k": top_k}

    def scores_sql(self, query: str, paper_ids: list[str]) -> tuple[str, dict]:
        """The statement and parameters that score the given papers (those sharing no term are absent)."""
        return SCORES_FOR_SQL, {**self._params(tokenise(query)), "paper_ids": json.dumps(paper_ids)}

    def search(self, query: str, top_k: int = 10) -> list[tuple[str, float]]:
        """The top ``top_k`` ``(paper id, score)`` pairs, best first, ties by id; empty for a query with no token."""
        if not tokenise(query):
            return []
        with read_snapshot(self._conn) as conn:
            sql, params = self.search_sql(query, top_k)
            return [(row[0], row[1]) for row in conn.execute(sql, params)]

    def scores(self, query: str, paper_ids: list[str]) -> dict[str, float]:
        """BM25 score of each paper in ``paper_ids`` for ``query`` (0.0 for one that shares no term with it)."""
        result = dict.fromkeys(paper_ids, 0.0)
        if not paper_ids or not tokenise(query):
            return result
        with read_snapshot(self._conn) as conn:
            sql, params = self.scores_sql(query, paper_ids)
            result.update((row[0], row[1]) for row in conn.execute(sql, params))
        return result
