"""evidence runs: the audit trail of `retrieval explain --save` (runs, their graph's nodes and edges)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "evidence_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Text(), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("subqueries", sa.Text(), nullable=False),
        sa.Column("ranker", sa.String(length=16), nullable=False),
        sa.Column("recency", sa.String(length=16), nullable=False),
        sa.Column("reference_year", sa.Integer(), nullable=True),
        sa.Column("settings", sa.Text(), nullable=False),
        sa.Column("seeds", sa.Integer(), nullable=False),
        sa.Column("found_nodes", sa.Integer(), nullable=False),
        sa.Column("found_edges", sa.Integer(), nullable=False),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column("edges", sa.Integer(), nullable=False),
        sa.Column("kept_nodes", sa.Integer(), nullable=False),
        sa.Column("kept_edges", sa.Integer(), nullable=False),
        sa.Column("scorer", sa.Text(), nullable=False),
        sa.Column("scorer_bound", sa.Integer(), nullable=False),
        sa.Column("scorer_calls", sa.Integer(), nullable=False),
        sa.Column("iterations", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("warnings", sa.Text(), nullable=False),
        sa.Column("wall_ms", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evidence_runs")),
    )
    op.create_table(
        "evidence_run_nodes",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("paper_id", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("year", sa.Integer(), nullable=True),
        sa.Column("age", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=32), nullable=False),
        sa.Column("seed_subqueries", sa.Text(), nullable=True),
        sa.Column("seed_relevance", sa.Float(), nullable=True),
        sa.Column("kept", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["evidence_runs.id"],
            name=op.f("fk_evidence_run_nodes_run_id_evidence_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "paper_id", name=op.f("pk_evidence_run_nodes")),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_evidence_run_nodes_paper_id", "evidence_run_nodes", ["paper_id"], unique=False)
    op.create_table(
        "evidence_run_edges",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("citing_id", sa.Text(), nullable=False),
        sa.Column("cited_id", sa.Text(), nullable=False),
        sa.Column("claims_citing", sa.Integer(), nullable=False),
        sa.Column("claims_cited", sa.Integer(), nullable=False),
        sa.Column("covered_claims", sa.Integer(), nullable=False),
        sa.Column("delta", sa.Float(), nullable=False),
        sa.Column("age_weight", sa.Float(), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("kept", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["evidence_runs.id"],
            name=op.f("fk_evidence_run_edges_run_id_evidence_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "citing_id", "cited_id", name=op.f("pk_evidence_run_edges")),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_evidence_run_edges_run_id_cited_id", "evidence_run_edges", ["run_id", "cited_id"], unique=False)
    # The index records its schema revision where a person looks for it.
    op.execute("UPDATE index_info SET value = '0003' WHERE key = 'schema_revision'")


def downgrade() -> None:
    op.execute("UPDATE index_info SET value = '0002' WHERE key = 'schema_revision'")
    op.drop_index("ix_evidence_run_edges_run_id_cited_id", table_name="evidence_run_edges")
    op.drop_table("evidence_run_edges")
    op.drop_index("ix_evidence_run_nodes_paper_id", table_name="evidence_run_nodes")
    op.drop_table("evidence_run_nodes")
    op.drop_table("evidence_runs")
