"""The BM25 variant this index computes, in one place: idf is computed only here (the lexical pass passes each
query term's weight to its SQL), tf_norm is here as Python and as the SQL text every scoring statement uses.

Okapi BM25 with Lucene's idf (the +1 inside the log keeps it positive)::

    idf(t)     = ln(1 + (N - df + 0.5) / (df + 0.5))
    tf_norm    = f * (k1 + 1) / (f + k1 * (1 - b + b * dl / avgdl))
    score(d,q) = sum over the query's tokens of idf(t) * tf_norm(t, d)

with k1 = 1.5 and b = 0.75 (recorded in the index). A term's bound, what one of its postings can contribute at
most, is ``tf_norm`` at the largest count and the smallest length of each chunk of its postings BLOBs
(``retrieval.store.postings``): exact at any average length, so adds and removes never loosen it.
"""

from __future__ import annotations

import math

K1 = 1.5
B = 0.75
# Relative slack on every bound, so that rounding in floating point never prunes a paper that ties.
BOUND_SLACK = 1e-9
#: The top k is ranked on scores rounded to this many decimal places (ties by paper id): a sum's value depends,
#: by an ulp, on the order of its additions, which differs between query plans, and a tie must not.
SCORE_DECIMALS = 10
#: Absolute slack taken off a threshold, ten times the rounding above, so a pruned paper cannot round into a tie.
TIE_SLACK = 1e-9


def idf(n_papers: int, df: int) -> float:
    """Lucene's BM25 idf: ``ln(1 + (N - df + 0.5) / (df + 0.5))``."""
    return math.log(1.0 + (n_papers - df + 0.5) / (df + 0.5))


def tf_norm(count: int, length: int, avgdl: float, k1: float = K1, b: float = B) -> float:
    """The term-frequency factor ``f * (k1 + 1) / (f + k1 * (1 - b + b * dl / avgdl))``."""
    return count * (k1 + 1.0) / (count + k1 * (1.0 - b + b * length / avgdl))


def tf_norm_sql(count: str = "tf.count", length: str = "dl.length", double=None) -> str:
    """``tf_norm`` as SQL over the columns ``count`` and ``length`` with the parameters ``:k1``, ``:b`` and
    ``:avgdl``: one text, so every statement computes the same doubles in the same order. ``double`` makes each
    operand a double where the dialect needs it said (a statement's ``Dialect.double``: on PostgreSQL ``REAL``
    is float4 and a bare ``1.0`` numeric), so both compute the same doubles."""
    k1, b, avgdl, one = (
        (":k1", ":b", ":avgdl", "1.0") if double is None else map(double, (":k1", ":b", ":avgdl", "1.0"))
    )
    return f"{count} * ({k1} + {one}) / ({count} + {k1} * ({one} - {b} + {b} * {length} / {avgdl}))"


def _double(operand: str) -> str:
    return f"CAST({operand} AS double precision)"


#: ``tf_norm`` over a posting ``tf`` of ``term_freq`` (its ``count``) and its paper's ``doc_len`` row ``dl`` (its
#: ``length``): the text every scoring statement uses (a test checks it against ``tf_norm``), and as PostgreSQL
#: runs it.
TF_NORM_SQL = tf_norm_sql()
TF_NORM_SQL_POSTGRESQL = tf_norm_sql(double=_double)
