"""incremental updates: which record declared each citation, field provenance, an index on year

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _citations_0001() -> sa.Table:
    """The citations table as revision 0001 made it: batch mode copies from it, online and offline alike."""
    return sa.Table(
        "citations",
        sa.MetaData(),
        sa.Column("citing_id", sa.Text(), nullable=False),
        sa.Column("cited_id", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["citing_id"], ["papers.id"], name="fk_citations_citing_id_papers"),
        sa.PrimaryKeyConstraint("citing_id", "cited_id", name="pk_citations"),
        sa.Index("ix_citations_cited_citing", "cited_id", "citing_id"),
        sqlite_with_rowid=False,
    )


def upgrade() -> None:
    # Every edge of a 0001 index came from the citing paper's reference list. A citing paper may now be
    # outside the corpus (named only by the cited paper's record), so citing_id no longer refers to papers.
    with op.batch_alter_table("citations", copy_from=_citations_0001()) as batch:
        batch.drop_constraint("fk_citations_citing_id_papers", type_="foreignkey")
        batch.add_column(sa.Column("listed_by_citing", sa.Boolean(), server_default=sa.true(), nullable=False))
        batch.add_column(sa.Column("listed_by_cited", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.create_index("ix_papers_year", "papers", ["year"], unique=False)
    op.create_table(
        "field_sources",
        sa.Column("paper_id", sa.Text(), nullable=False),
        sa.Column("field", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["paper_id"], ["papers.id"], name=op.f("fk_field_sources_paper_id_papers")),
        sa.PrimaryKeyConstraint("paper_id", "field", name=op.f("pk_field_sources")),
        sqlite_with_rowid=False,
    )
    # The index now records its schema revision where a person looks for it.
    op.execute("UPDATE index_info SET value = '0002' WHERE key = 'schema_revision'")


def downgrade() -> None:
    op.execute("UPDATE index_info SET value = '0001' WHERE key = 'schema_revision'")
    op.drop_table("field_sources")
    op.drop_index("ix_papers_year", table_name="papers")
    with op.batch_alter_table("citations") as batch:
        batch.drop_column("listed_by_cited")
        batch.drop_column("listed_by_citing")
        batch.create_foreign_key("fk_citations_citing_id_papers", "papers", ["citing_id"], ["id"])
