"""The audit trail of evidence runs (``retrieval explain --save``), as SQLAlchemy 2 typed models.

Three tables, created by migration 0003, so that ``sqlite3`` can answer "why was this paper kept?" long after:

- ``evidence_runs``: one row per saved run: the query and sub-queries, the settings, the sizes announced before
  scoring, the scorer and its call count, the run's health;
- ``evidence_run_nodes``: every paper of the run's graph: how it came in (``role``), kept or dropped and why, its
  score and rank;
- ``evidence_run_edges``: every citation edge of the graph: the coverage Delta, the recency factor, the weight the
  walk used, kept or pruned and why.

Paper ids are stored as text without a foreign key to ``papers``, and each node keeps the title and year it had:
a run records what the index held when it ran, and stays readable after a paper is replaced or removed.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from .models import Base


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
