"""The BM25 variant this index computes, in one place: idf is computed only here (the lexical pass passes each
query term's weight to its SQL), tf_norm is here as Python and as the SQL text every scoring statement uses, and
the writer's impacts follow the same definitions.

Okapi BM25 with Lucene's idf (the +1 inside the log keeps it positive)::

    idf(t)     = ln(1 + (N - df + 0.5) / (df + 0.5))
    tf_norm    = f * (k1 + 1) / (f + k1 * (1 - b + b * dl / avgdl))
    score(d,q) = sum over the query's tokens of idf(t) * tf_norm(t, d)

with k1 = 1.5 and b = 0.75 (recorded in the index). ``impact`` is ``ceil(IMPACT_SCALE * tf_norm)`` at the
average length of the moment a posting was written: an integer upper bound used only to prune (never to score).
"""

from __future__ import annotations

import math

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a query process starts faster)
if TYPE_CHECKING:  # numpy is imported by the build only: a query process starts faster without it
    import numpy as np

K1 = 1.5
B = 0.75
#: Impacts are stored in thousandths of tf_norm (which lies in (0, k1 + 1)), so they fit in two bytes.
IMPACT_SCALE = 1000
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


#: ``tf_norm`` as SQL over a posting ``tf`` (its ``count`` and its paper's ``length``) with the parameters ``:k1``,
#: ``:b`` and ``:avgdl``: the one text every scoring statement uses (a test checks it against ``tf_norm``).
TF_NORM_SQL = "tf.count * (:k1 + 1.0) / (tf.count + :k1 * (1.0 - :b + :b * tf.length / :avgdl))"
#: The same text on PostgreSQL, derived from it (so the operations and their order are the same by construction),
#: every operand a double: ``REAL`` is float4 there and a bare ``1.0`` numeric, so both backends compute the same
#: doubles.
TF_NORM_SQL_POSTGRESQL = TF_NORM_SQL
for _operand in ("1.0", ":k1", ":b", ":avgdl"):
    TF_NORM_SQL_POSTGRESQL = TF_NORM_SQL_POSTGRESQL.replace(_operand, f"CAST({_operand} AS float8)")
del _operand


def impact(count: int, length: int, avgdl: float, k1: float = K1, b: float = B) -> int:
    """``ceil(IMPACT_SCALE * tf_norm)``: what ``term_freq.impact`` holds for a posting written at ``avgdl``."""
    return math.ceil(IMPACT_SCALE * tf_norm(count, length, avgdl, k1, b))


def impacts(counts: np.ndarray, lengths: np.ndarray, avgdl: float, k1: float = K1, b: float = B) -> np.ndarray:
    """``impact`` for arrays of counts and document lengths (the bulk build's vectorised form)."""
    import numpy as np

    counts = counts.astype(np.float64)
    norm = counts * (k1 + 1.0) / (counts + k1 * (1.0 - b + b * lengths.astype(np.float64) / avgdl))
    return np.ceil(IMPACT_SCALE * norm).astype(np.int64)


def drift(avgdl_now: float, avgdl_impacts: float) -> float:
    """How much larger tf_norm can be now than when impacts were written: ``max(1, avgdl_now / avgdl_impacts)``.

    tf_norm grows with avgdl, and the ratio of its denominators at two averages is at most the ratio of the
    averages, so ``tf_norm(now) <= drift * tf_norm(then) <= drift * impact / IMPACT_SCALE``: after papers are
    added or removed the stored impacts are still bounds once multiplied by this factor.
    """
    if avgdl_impacts <= 0:
        return 1.0
    return max(1.0, avgdl_now / avgdl_impacts)
