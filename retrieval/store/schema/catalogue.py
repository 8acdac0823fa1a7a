"""Every table of the index once: its columns in record order and the part it plays. The build's copy to a
server, the sharded layout, the check an open makes and a read snapshot's lock order all read this list.

The schema itself is the models (``retrieval.store.schema.models``, which the migrations create); this list repeats
their names and columns so that a query process never imports SQLAlchemy, and a test holds the two equal.
"""

from __future__ import annotations

from collections import namedtuple

_FIELDS = "name columns shard_key locked copied since booleans checked_indexes until"


class Table(namedtuple("Table", _FIELDS, defaults=(None, False, True, "0001", (), (), None))):
    """One table: ``name`` and ``columns`` (in record order, as ``COPY`` sends them); ``shard_key``, the column a
    sharded index distributes it by (None: the coordinator's own); ``locked``, read by a search, so a
    PostgreSQL read snapshot locks it (ACCESS SHARE) as it begins; ``copied``, copied by a server build from the
    SQLite build (the others start empty); ``since``, the schema revision that added it; ``booleans``, columns
    stored as booleans on PostgreSQL (0/1 in SQLite); ``checked_indexes``, ``(index, revision)`` pairs an open
    requires once the index is at that revision; ``until``, the revision that replaced it (a table of older
    indexes only, which nothing copies, locks or distributes)."""

    __slots__ = ()


#: Parents first (the foreign keys' order): the order of a build's copy, a shard's load and the read locks.
# fmt: off
TABLES = (
    Table("alembic_version", ("version_num",)),
    Table("index_info", ("key", "value"), locked=True),
    Table("papers", ("id", "title", "abstract", "year", "source"), "id", locked=True),
    Table(
        "paper_authors",
        ("paper_id", "position", "name", "surname", "name_key"),
        "paper_id",
        locked=True,
        checked_indexes=(("ix_paper_authors_surname", "0006"),),
    ),
    Table("field_sources", ("paper_id", "field", "source"), "paper_id"),
    # Until 0010 the citations were this table; it is now a view of the same name and columns over the next two.
    Table(
        "citations",
        ("citing_id", "cited_id", "listed_by_citing", "listed_by_cited"),
        locked=True,
        copied=False,
        booleans=("listed_by_citing", "listed_by_cited"),
        checked_indexes=(("ix_citations_cited_citing", "0001"),),
        until="0010",
    ),
    Table(
        "paper_keys",
        ("key", "paper_id"),
        locked=True,
        since="0010",
        checked_indexes=(("ix_paper_keys_paper_id", "0010"),),
    ),
    Table(
        "citation_links",
        ("citing_key", "cited_key", "listed_by_citing", "listed_by_cited"),
        "citing_key",
        locked=True,
        since="0010",
        booleans=("listed_by_citing", "listed_by_cited"),
        checked_indexes=(("ix_citation_links_cited_citing", "0010"),),
    ),
    Table("cited_counts", ("paper_id", "cited_by"), "paper_id", locked=True, since="0004"),
    Table("doc_freq", ("term_id", "term", "df"), locked=True),
    Table("doc_len", ("doc_id", "paper_id", "length"), "doc_id", locked=True),
    Table("term_freq", ("term_id", "doc_id", "count"), "doc_id", locked=True),
    Table(
        "postings",
        ("term_id", "first_doc", "last_doc", "df", "max_count", "min_length", "doc_ids", "counts", "lengths"),
        locked=True,
        since="0007",
    ),
    Table("paper_vectors", ("paper_id", "vector"), "paper_id", locked=True, since="0009"),
    Table(
        "evidence_runs",
        (
            "id", "created_at", "query", "subqueries", "ranker", "recency", "reference_year", "settings", "seeds",
            "found_nodes", "found_edges", "nodes", "edges", "kept_nodes", "kept_edges", "scorer", "scorer_bound",
            "scorer_calls", "iterations", "status", "warnings", "wall_ms",
        ),
        copied=False,
        since="0003",
    ),
    Table(
        "evidence_run_nodes",
        (
            "run_id", "paper_id", "title", "year", "age", "role", "seed_subqueries", "seed_relevance", "kept",
            "reason", "score", "rank",
        ),
        copied=False,
        since="0003",
        booleans=("kept",),
    ),
    Table(
        "evidence_run_edges",
        (
            "run_id", "citing_id", "cited_id", "claims_citing", "claims_cited", "covered_claims", "delta",
            "age_weight", "weight", "kept", "reason",
        ),
        copied=False,
        since="0003",
        booleans=("kept",),
    ),
    Table(
        "query_log",
        (
            "id", "logged_at", "kind", "query", "settings", "hit_count", "top_score", "avg_score", "wall_ms",
            "gate_fired", "result_ids", "page_limit", "page_offset",
        ),
        copied=False,
        since="0005",
        booleans=("gate_fired",),
        checked_indexes=(("ix_query_log_logged_at", "0005"),),
    ),
)
# fmt: on

BY_NAME = {table.name: table for table in TABLES}
View = namedtuple("View", "name since tables")
#: The views the migrations make: the revision that made each as it is (``citations`` was a table before) and the
#: tables it reads (a read of a view is a read of those).
VIEWS = {
    v.name: v
    for v in (
        View("citations", "0010", ("citation_links", "paper_keys")),
        View("term_counts", "0001", ("term_freq", "doc_freq", "doc_len")),
    )
}
#: The tables of an index at this version's revision.
CURRENT = tuple(t for t in TABLES if t.until is None)
#: What a server build copies from the SQLite build, in order.
COPIED = tuple(t for t in CURRENT if t.copied)
#: What a PostgreSQL read snapshot locks, in this order (a rebuild's swap takes the same locks in the same order).
LOCKED = tuple(t.name for t in CURRENT if t.locked)
#: The revision that added the last of them: a snapshot on a server reads an index of this revision or later.
LOCKED_SINCE = max(t.since for t in CURRENT if t.locked)
#: A sharded index's distributed tables, each with its partition key, in load order.
DISTRIBUTED = {t.name: t.shard_key for t in CURRENT if t.shard_key}
#: The coordinator's own tables a sharded build copies from the SQLite build.
COORDINATOR = tuple(t.name for t in COPIED if not t.shard_key)
#: ``(table, column)`` pairs stored as booleans on PostgreSQL.
BOOLEANS = frozenset((t.name, c) for t in TABLES for c in t.booleans)


def required(revision: str) -> list[str]:
    """The tables, views and indexes an index at ``revision`` must have, besides ``alembic_version`` and ``index_info``
    (which an open reads first)."""
    held = [t for t in TABLES if t.since <= revision and (t.until is None or revision < t.until)]
    names = [t.name for t in held if t.name not in ("alembic_version", "index_info")]
    views = [v.name for v in VIEWS.values() if v.since <= revision]
    return names + views + [i for t in held for i, since in t.checked_indexes if since <= revision]
