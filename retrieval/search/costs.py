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
import threading

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
#: Importing NumPy, charged in a process that has not yet, until the queries the charge kept in SQL have cost
#: that much more than the BLOBs would have (``NUMPY``).
NUMPY_IMPORT_COST = 60_000.0
#: The SQL path's cost against the BLOBs' on each backend, as a multiple of what the constants above (fitted on
#: SQLite) say. On a PostgreSQL server each of SQL's statements is a round trip whose aggregation runs at several
#: times SQLite's cost, where the BLOB path, whose lists cross the connection (in binary), pays less than twice
#: SQLite's (both paths timed on every query, hep-th and 100K papers); replayed through this model, the measured
#: times were least with a factor of 2.5 to 3, and still are since the lists travel in binary. A sharded index
#: takes its server's: each SQL statement there is a round trip to every shard, and whole hep-th searches were
#: fastest with 3 to 5 (long queries' p50 about 70 ms with 1, where their sentences' sub-queries went to SQL, and
#: about 45 ms with 3).
SQL_FACTOR = {"sqlite": 1.0, "postgresql": 3.0}


def sql_factor(dialect: str) -> float:
    """The multiple of SQL's costs on ``dialect`` (``SQL_FACTOR``), a sharded index's its server's."""
    return SQL_FACTOR.get(dialect, 1.0)


class Import:
    """A module's import, charged to the path that needs it in a process that has not made it (``charge``), until
    the queries the charge kept off that path have cost, as this model expects them, the import's cost more than
    the path would have (``forgo``). That is the break-even rule of renting skis until the rent has paid for a
    pair: never more than twice what knowing the future would cost. A command of one short query never imports
    NumPy, and a long-lived process of short queries (a server, an agent's session) does after a few of them,
    where it would otherwise answer every one in SQL for its whole life."""

    def __init__(self, module: str, cost: float) -> None:
        self.module = module
        self.cost = cost
        self.forgone = 0.0
        self._lock = threading.Lock()

    def charge(self) -> float:
        """The import's cost to the next query: 0 once made, or once paid for by what the charge has forgone."""
        return 0.0 if self.module in sys.modules or self.forgone >= self.cost else self.cost

    def forgo(self, taken: float, imported: float) -> None:
        """Count a query sent the other way at an expected cost of ``taken`` where this path, imported, would have
        cost ``imported``: the difference, when the import's charge made the choice."""
        if taken > imported and self.charge():
            with self._lock:
                self.forgone += taken - imported


#: NumPy's import, as the BLOB path is charged it.
NUMPY = Import("numpy", NUMPY_IMPORT_COST)


def blobs(postings: int, terms: int, papers: int) -> float:
    """The BLOB path's expected cost for a query of ``terms`` covering ``postings`` in an index of ``papers``,
    NumPy's import included where it is still charged (``NUMPY``)."""
    return blobs_imported(postings, terms, papers) + NUMPY.charge()


def blobs_imported(postings: int, terms: int, papers: int) -> float:
    """``blobs`` in a process that has imported NumPy."""
    cost = BLOB_FIXED_COST + BLOB_TERM_COST * terms
    if postings * SPARSE_ACCUMULATION > papers:
        cost += BLOB_POSTING_COST * postings + BLOB_DENSE_COST * papers
    else:
        cost += BLOB_SPARSE_POSTING_COST * postings
    return cost


def sql_unplanned(postings: int, terms: int, sampled: bool) -> float:
    """The SQL path's expected cost before its plan: its two statements, and the postings it reads, all of them
    when no term is rare enough to sample a threshold from (``sampled`` False), else a share for many terms."""
    share = SQL_MANY_TERMS_SHARE if sampled and terms > FEW_TERMS else 1.0
    return sql_least(terms) + SQL_POSTING_COST * share * postings


def sql_least(terms: int) -> float:
    """The least the SQL path can cost for a query of ``terms``: its two statements, however well it prunes."""
    return 2 * sql_statement(terms)


def sql_statement(terms: int) -> float:
    """The fixed cost of one of the SQL path's statements (its plan's threshold sample, its top k) for a query of
    ``terms``."""
    return SQL_STATEMENT_COST + SQL_TERM_COST * terms


def sql_planned(estimate: float | None, postings: int, terms: int) -> float:
    """What is left of the SQL path's cost once planned: its top-k statement, pruned with an expected work of
    ``estimate`` (``lexical.estimated_cost``), or when None the plain aggregation over every posting."""
    fixed = sql_statement(terms)
    if estimate is None:
        return fixed + SQL_POSTING_COST * postings
    return fixed + SQL_PLANNED_COST * estimate
