"""The index schema as SQLAlchemy 2 typed models. Tables are created only by the Alembic migrations.

Words stay visible to a person with ``sqlite3``: ``doc_freq`` holds each term beside its id, and the view
``term_counts`` (created by the migrations; views are not models) shows ``term_freq`` with words and paper ids.
"""

from __future__ import annotations

from sqlalchemy import Boolean, ForeignKey, Index, Integer, MetaData, String, Text, false, text, true
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ..bm25 import HEAD_IMPACT

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
    """A paper's authors, in their order on the paper (position 0 is the first author)."""

    __tablename__ = "paper_authors"
    __table_args__ = (Index("ix_paper_authors_name", "name"), {"sqlite_with_rowid": False})

    paper_id: Mapped[str] = mapped_column(Text, ForeignKey("papers.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(Text)


class Citation(Base):
    """``citing_id`` cites ``cited_id``. Either paper may not be in the corpus (yet): such a reference is kept,
    and becomes a live edge as soon as that paper is added.

    An edge can be declared by the citing paper's record (its references) or by the cited paper's record (a
    Semantic Scholar ``citations`` list), or both; the two flags say which, so that removing a paper takes away
    exactly what its own record declared, as a rebuild without it would."""

    __tablename__ = "citations"
    __table_args__ = (Index("ix_citations_cited_citing", "cited_id", "citing_id"), {"sqlite_with_rowid": False})

    citing_id: Mapped[str] = mapped_column(Text, primary_key=True)
    cited_id: Mapped[str] = mapped_column(Text, primary_key=True)
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
    """The vocabulary: each term, its integer id, the number of papers containing it, and the largest
    ``impact`` of its postings (an upper bound: a remove may leave it above the true maximum)."""

    __tablename__ = "doc_freq"

    term_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    term: Mapped[str] = mapped_column(Text, unique=True)
    df: Mapped[int] = mapped_column(Integer)
    max_impact: Mapped[int] = mapped_column(Integer, server_default="0")


class TermFreq(Base):
    """How often a term occurs in a paper's title and abstract (one row per term and paper), clustered by term
    so that a term's postings are one range, in ``doc_id`` order.

    ``length`` repeats the paper's length from ``doc_len``, so that scoring a posting needs no other row.
    ``impact`` is ``ceil(1000 * count * (k1 + 1) / (count + k1 * (1 - b + b * length / impact_avgdl)))``: an
    upper bound of the posting's BM25 term-frequency factor at the average length ``impact_avgdl`` recorded
    in ``index_info`` when it was written. Scores never use it; a query uses it to skip papers that provably
    cannot reach its top k (see ``retrieval.search.lexical``). The partial index ``ix_term_freq_head`` holds
    the postings with impact >= ``HEAD_IMPACT`` (1250), read best first."""

    __tablename__ = "term_freq"
    __table_args__ = (
        Index(
            "ix_term_freq_head",
            "term_id",
            "impact",
            "count",
            "length",
            sqlite_where=text(f"impact >= {HEAD_IMPACT}"),
        ),
        {"sqlite_with_rowid": False},
    )

    term_id: Mapped[int] = mapped_column(Integer, ForeignKey("doc_freq.term_id"), primary_key=True)
    doc_id: Mapped[int] = mapped_column(Integer, ForeignKey("doc_len.doc_id"), primary_key=True)
    count: Mapped[int] = mapped_column(Integer)
    length: Mapped[int] = mapped_column(Integer)
    impact: Mapped[int] = mapped_column(Integer)


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


# The audit trail of evidence runs: imported here so that Base.metadata (and Alembic) see its tables.
from . import audit  # noqa: E402,F401
