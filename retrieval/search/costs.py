"""The lexical pass's cost model: what a top-k query is expected to cost, in microseconds, in SQL over
``term_freq`` (``retrieval.search.lexical``) and over the postings BLOBs in NumPy (``retrieval.search.blobs``).

The constants are fitted to both paths timed on every query of the benchmark corpora (``bench/lexical_paths.py``,
hep-th and the 500K synthetic corpus). SQL pays per posting row it reads, scores and groups; a pruned plan reads
few of them, but which ones is known only once its threshold sample has run. NumPy pays little per posting, a
pass over a dense score array the size of the index when the postings are not few beside it, and its import,
once per process.
"""

from __future__ import annotations

import sys

#: The fixed cost of one SQL statement of the lexical pass (its preparation, the JSON parameters, the rows out),
#: and its cost per query term (each is read out of the JSON, sampled, looked up or joined).
SQL_STATEMENT_COST = 250.0
SQL_TERM_COST = 50.0
#: One posting of the plain aggregation (read, joined to its paper's length, scored and grouped), and one unit
#: of a pruned plan's estimate (``lexical.estimated_cost``, whose units are such postings, measured cheaper).
SQL_POSTING_COST = 1.0
SQL_PLANNED_COST = 0.5
#: Before any plan: the share of a many-term query's postings a pruned plan is expected to read.
SQL_MANY_TERMS_SHARE = 0.3
#: Queries of up to this many terms are planned before the path is chosen (their pruning varies most), unless
#: the BLOBs would answer them in less than this: a plan's statement is then not worth its round trip.
FEW_TERMS = 20
PLAN_ABOVE = 2000.0
#: NumPy's fixed cost per query (the statement that reads the lists, the best papers' ids) and per query term
#: (its chunks decoded); per posting summed by paper over sorted doc ids (``SPARSE_ACCUMULATION``) or added into
#: the dense score array, and then per paper of the index (the array's passes: zeroing, thresholds, candidates).
BLOB_FIXED_COST = 150.0
BLOB_TERM_COST = 15.0
BLOB_SPARSE_POSTING_COST = 0.04
BLOB_POSTING_COST = 0.012
BLOB_DENSE_COST = 0.01
#: The dense array is used when the query's postings are not this many times fewer than the index's papers;
#: fewer are summed by paper over their sorted doc ids, with no pass over the whole index.
SPARSE_ACCUMULATION = 16
#: Importing NumPy, charged in a process that has not yet.
NUMPY_IMPORT_COST = 60_000.0
#: The SQL path's cost against the BLOBs' on each backend, as a multiple of what the constants above (fitted on
#: SQLite) say. On a PostgreSQL server each of SQL's statements is a round trip whose aggregation runs at about
#: four times SQLite's cost, where the BLOB path, whose lists cross the connection, pays about twice SQLite's
#: (``bench/lexical_paths.py`` on both, hep-th and 100K papers); replayed through this model, the measured times
#: were least with a factor of 2.5 to 3. A sharded index is not measured: as SQLite.
SQL_FACTOR = {"sqlite": 1.0, "postgresql": 3.0}


def sql_factor(dialect: str, sharded: bool = False) -> float:
    """The multiple of SQL's costs on ``dialect`` (``SQL_FACTOR``; 1 on a sharded index)."""
    return 1.0 if sharded else SQL_FACTOR.get(dialect, 1.0)


def blobs(postings: int, terms: int, papers: int) -> float:
    """The BLOB path's expected cost for a query of ``terms`` covering ``postings`` in an index of ``papers``."""
    cost = BLOB_FIXED_COST + BLOB_TERM_COST * terms
    if postings * SPARSE_ACCUMULATION > papers:
        cost += BLOB_POSTING_COST * postings + BLOB_DENSE_COST * papers
    else:
        cost += BLOB_SPARSE_POSTING_COST * postings
    if "numpy" not in sys.modules:
        cost += NUMPY_IMPORT_COST
    return cost


def sql_unplanned(postings: int, terms: int, sampled: bool) -> float:
    """The SQL path's expected cost before its plan: its two statements, and the postings it reads, all of them
    when no term is rare enough to sample a threshold from (``sampled`` False), else a share for many terms."""
    share = SQL_MANY_TERMS_SHARE if sampled and terms > FEW_TERMS else 1.0
    return sql_least(terms) + SQL_POSTING_COST * share * postings


def sql_least(terms: int) -> float:
    """The least the SQL path can cost for a query of ``terms``: its two statements, however well it prunes."""
    return 2 * (SQL_STATEMENT_COST + SQL_TERM_COST * terms)


def sql_planned(estimate: float | None, postings: int, terms: int) -> float:
    """What is left of the SQL path's cost once planned: its top-k statement, pruned with an expected work of
    ``estimate`` (``lexical.estimated_cost``), or when None the plain aggregation over every posting."""
    fixed = SQL_STATEMENT_COST + SQL_TERM_COST * terms
    if estimate is None:
        return fixed + SQL_POSTING_COST * postings
    return fixed + SQL_PLANNED_COST * estimate
