"""The index schema as SQLAlchemy 2 typed models. Tables are created only by the Alembic migrations.

Words stay visible to a person with ``sqlite3``: ``doc_freq`` holds each term beside its id, and the view
``term_counts`` (created by the migrations; views are not models) shows ``term_freq`` with words and paper ids;
the view ``citations`` shows ``citation_links`` with paper ids.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    false,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Deterministic constraint names, so migrations (and batch mode on SQLite) can refer to them.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class PaperRow(Base):
    """One paper: the text that is indexed and the fields a result shows."""

    __tablename__ = "papers"
    __table_args__ = (Index("ix_papers_year", "year"),)

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    title: Mapped[str] = mapped_column(Text)
    abstract: Mapped[str] = mapped_column(Text, default="")
    year: Mapped[int | None] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(Text)


class PaperAuthor(Base):
    """A paper's authors, in their order on the paper (position 0 is the first author), each with its folded
    ``surname`` and ``name_key`` (its words, folded, the surname last; ``retrieval.corpus.names``), which
    ``--author`` matches."""

    __tablename__ = "paper_authors"
    __table_args__ = (
        Index("ix_paper_authors_name", "name"),
        Index("ix_paper_authors_surname", "surname"),
        {"sqlite_with_rowid": False},
    )

    paper_id: Mapped[str] = mapped_column(Text, ForeignKey("papers.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    surname: Mapped[str] = mapped_column(Text, server_default="")
    name_key: Mapped[str] = mapped_column(Text, server_default="")


class PaperKey(Base):
    """Every paper id a citation names, numbered: ``citation_links`` stores these numbers instead of the ids, and
    the view ``citations`` (created by the migrations) shows its rows with the ids. An id may name no paper of the
    corpus (a reference to a paper not indexed). Kept by the writers: a number no citation uses goes."""

    __tablename__ = "paper_keys"
    __table_args__ = (Index("ix_paper_keys_paper_id", "paper_id", unique=True),)

    key: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    paper_id: Mapped[str] = mapped_column(Text)


class CitationLink(Base):
    """The paper numbered ``citing_key`` cites the one numbered ``cited_key`` (``paper_keys``); read it as the view
    ``citations`` (``citing_id``, ``cited_id``, the flags). Either paper may not be in the corpus (yet): such a
    reference is kept, and becomes a live edge as soon as that paper is added.

    An edge can be declared by the citing paper's record (its references) or by the cited paper's record (a
    Semantic Scholar ``citations`` list), or both; the two flags say which, so that removing a paper takes away
    exactly what its own record declared, as a rebuild without it would."""

    __tablename__ = "citation_links"
    __table_args__ = (
        Index("ix_citation_links_cited_citing", "cited_key", "citing_key"),
        {"sqlite_with_rowid": False},
    )

    citing_key: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    cited_key: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    listed_by_citing: Mapped[bool] = mapped_column(Boolean, server_default=true())
    listed_by_cited: Mapped[bool] = mapped_column(Boolean, server_default=false())


class CitedCount(Base):
    """How many citation rows name a paper as cited (whether or not the citing paper is in the corpus): the
    in-degree that orders a hub's neighbours in the graph pass, kept by the writer rather than counted per query.
    Ids outside the corpus are counted too, so a paper added later finds its count already right."""

    __tablename__ = "cited_counts"
    __table_args__ = {"sqlite_with_rowid": False}

    paper_id: Mapped[str] = mapped_column(Text, primary_key=True)
    cited_by: Mapped[int] = mapped_column(Integer)


class FieldSource(Base):
    """Which source supplied a field of a paper, where the record was merged from several sources."""

    __tablename__ = "field_sources"
    __table_args__ = {"sqlite_with_rowid": False}

    paper_id: Mapped[str] = mapped_column(Text, ForeignKey("papers.id"), primary_key=True)
    field: Mapped[str] = mapped_column(Text, primary_key=True)
    source: Mapped[str] = mapped_column(Text)


class DocFreq(Base):
    """The vocabulary: each term, its integer id and the number of papers containing it."""

    __tablename__ = "doc_freq"

    term_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    term: Mapped[str] = mapped_column(Text, unique=True)
    df: Mapped[int] = mapped_column(Integer)


class TermFreq(Base):
    """How often a term occurs in a paper's title and abstract (one row per term and paper), clustered by term
    so that a term's postings are one range, in ``doc_id`` order: the table of record for the postings, which
    the BLOBs of ``postings`` repeat packed. A posting's paper length is its ``doc_len`` row's."""

    __tablename__ = "term_freq"
    __table_args__ = {"sqlite_with_rowid": False}

    term_id: Mapped[int] = mapped_column(Integer, ForeignKey("doc_freq.term_id"), primary_key=True)
    doc_id: Mapped[int] = mapped_column(Integer, ForeignKey("doc_len.doc_id"), primary_key=True)
    count: Mapped[int] = mapped_column(Integer)


class Postings(Base):
    """``term_freq`` again, packed for NumPy: a term's postings as BLOB rows of at most 16,384 postings each, in
    doc-id order, with the bounds that let a query skip what cannot reach its top k. Derived, kept equal to
    ``term_freq`` by every writer; ``retrieval.store.postings`` says what each column holds."""

    __tablename__ = "postings"

    term_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    first_doc: Mapped[int] = mapped_column(Integer, primary_key=True)
    last_doc: Mapped[int] = mapped_column(Integer)
    df: Mapped[int] = mapped_column(Integer)
    max_count: Mapped[int] = mapped_column(Integer)
    min_length: Mapped[int] = mapped_column(Integer)
    doc_ids: Mapped[bytes] = mapped_column(LargeBinary)
    counts: Mapped[bytes] = mapped_column(LargeBinary)
    lengths: Mapped[bytes] = mapped_column(LargeBinary)


class PaperVector(Base):
    """A paper's text vector for the semantic signal (``retrieval.embed``): its title and abstract encoded by the
    model ``index_info.semantic_model`` names, as ``semantic_dims`` little-endian float16 values. Only an index
    built with ``--semantic`` has rows; then every paper has one."""

    __tablename__ = "paper_vectors"
    __table_args__ = {"sqlite_with_rowid": False}

    paper_id: Mapped[str] = mapped_column(Text, ForeignKey("papers.id"), primary_key=True)
    vector: Mapped[bytes] = mapped_column(LargeBinary)


class DocLen(Base):
    """A paper's integer document id (what postings refer to) and its length in tokens (title and abstract).

    ``doc_id`` is the rowid, so the length and paper id of a posting are one B-tree lookup away."""

    __tablename__ = "doc_len"

    doc_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    paper_id: Mapped[str] = mapped_column(Text, ForeignKey("papers.id"), unique=True)
    length: Mapped[int] = mapped_column(Integer)


class IndexInfo(Base):
    """What a later process needs to answer exactly as the builder would: N, avgdl, k1, b, the tokeniser,
    the years, the schema revision, and the build's summary. One ``key``/``value`` row each."""

    __tablename__ = "index_info"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


# -- the audit trail of evidence runs (`retrieval explain --save`, migration 0003) --------------------
#
# The audit trail of evidence runs (``retrieval explain --save``), as SQLAlchemy 2 typed models.
#
# Three tables, created by migration 0003, so that ``sqlite3`` can answer "why was this paper kept?" long after:
#
# - ``evidence_runs``: one row per saved run: the query and sub-queries, the settings, the sizes announced before
#   scoring, the scorer and its call count, the run's health;
# - ``evidence_run_nodes``: every paper of the run's graph: how it came in (``role``), kept or dropped and why, its
#   score and rank;
# - ``evidence_run_edges``: every citation edge of the graph: the coverage Delta, the recency factor, the weight the
#   walk used, kept or pruned and why.
#
# Paper ids are stored as text without a foreign key to ``papers``, and each node keeps the title and year it had:
# a run records what the index held when it ran, and stays readable after a paper is replaced or removed.


class EvidenceRunRow(Base):
    """One saved evidence run."""

    __tablename__ = "evidence_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[str] = mapped_column(Text)  # ISO 8601, UTC
    query: Mapped[str] = mapped_column(Text)
    subqueries: Mapped[str] = mapped_column(Text)  # JSON list; element 0 is the query itself
    ranker: Mapped[str] = mapped_column(String(16))
    recency: Mapped[str] = mapped_column(String(16))
    reference_year: Mapped[int | None] = mapped_column(Integer)
    settings: Mapped[str] = mapped_column(Text)  # JSON of every EvidenceConfig field
    seeds: Mapped[int] = mapped_column(Integer)
    found_nodes: Mapped[int] = mapped_column(Integer)
    found_edges: Mapped[int] = mapped_column(Integer)
    nodes: Mapped[int] = mapped_column(Integer)
    edges: Mapped[int] = mapped_column(Integer)
    kept_nodes: Mapped[int] = mapped_column(Integer)
    kept_edges: Mapped[int] = mapped_column(Integer)
    scorer: Mapped[str] = mapped_column(Text)
    scorer_bound: Mapped[int] = mapped_column(Integer)
    scorer_calls: Mapped[int] = mapped_column(Integer)
    iterations: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    warnings: Mapped[str] = mapped_column(Text)  # JSON list of strings
    wall_ms: Mapped[float] = mapped_column(Float)


class EvidenceRunNodeRow(Base):
    """A paper of a run's evidence graph."""

    __tablename__ = "evidence_run_nodes"
    __table_args__ = (Index("ix_evidence_run_nodes_paper_id", "paper_id"), {"sqlite_with_rowid": False})

    run_id: Mapped[int] = mapped_column(Integer, ForeignKey("evidence_runs.id", ondelete="CASCADE"), primary_key=True)
    paper_id: Mapped[str] = mapped_column(Text, primary_key=True)
    title: Mapped[str] = mapped_column(Text)
    year: Mapped[int | None] = mapped_column(Integer)
    age: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(32))  # seed | reference | citing | citing+reference
    seed_subqueries: Mapped[str | None] = mapped_column(Text)  # JSON list of sub-query positions, seeds only
    seed_relevance: Mapped[float | None] = mapped_column(Float)
    kept: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str | None] = mapped_column(Text)  # why a paper was dropped; NULL when kept
    score: Mapped[float] = mapped_column(Float)
    rank: Mapped[int | None] = mapped_column(Integer)


class EvidenceRunEdgeRow(Base):
    """A citation edge of a run's evidence graph: ``citing_id`` cites ``cited_id``."""

    __tablename__ = "evidence_run_edges"
    __table_args__ = (
        Index("ix_evidence_run_edges_run_id_cited_id", "run_id", "cited_id"),
        {"sqlite_with_rowid": False},
    )

    run_id: Mapped[int] = mapped_column(Integer, ForeignKey("evidence_runs.id", ondelete="CASCADE"), primary_key=True)
    citing_id: Mapped[str] = mapped_column(Text, primary_key=True)
    cited_id: Mapped[str] = mapped_column(Text, primary_key=True)
    claims_citing: Mapped[int] = mapped_column(Integer)
    claims_cited: Mapped[int] = mapped_column(Integer)
    covered_claims: Mapped[int] = mapped_column(Integer)
    delta: Mapped[float] = mapped_column(Float)
    age_weight: Mapped[float] = mapped_column(Float)
    weight: Mapped[float] = mapped_column(Float)
    kept: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str | None] = mapped_column(Text)  # why an edge was pruned; NULL when kept


class QueryLogRow(Base):
    """A logged query (``retrieval log on``, off by default; ``retrieval.store.querylog`` writes and reads the
    rows): when, which command, the text and the settings, and how it went."""

    __tablename__ = "query_log"
    __table_args__ = (Index("ix_query_log_logged_at", "logged_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    logged_at: Mapped[str] = mapped_column(Text)  # ISO 8601 UTC, milliseconds: 2026-12-01T09:30:00.123+00:00
    kind: Mapped[str] = mapped_column(String(16))  # search | similar | explain
    query: Mapped[str] = mapped_column(Text)
    settings: Mapped[str] = mapped_column(Text)  # JSON of every field of the command's configuration
    hit_count: Mapped[int] = mapped_column(Integer)
    top_score: Mapped[float] = mapped_column(Float)
    avg_score: Mapped[float] = mapped_column(Float)
    wall_ms: Mapped[float] = mapped_column(Float)
    gate_fired: Mapped[bool | None] = mapped_column(Boolean)  # NULL for a command without the gate (explain)
    result_ids: Mapped[str] = mapped_column(Text)  # JSON list of the returned paper ids, in rank order
    page_limit: Mapped[int | None] = mapped_column(Integer)  # NULL: no limit
    page_offset: Mapped[int] = mapped_column(Integer)
