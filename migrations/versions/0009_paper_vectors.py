"""paper vectors: a text vector per paper for the semantic signal (``retrieval build --semantic``)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 00:00:00

The table starts empty: an upgraded index keeps no vectors (its searches rank as before) until it is rebuilt with
``--semantic``. Which model made an index's vectors is recorded in ``index_info`` (``semantic_model``,
``semantic_dims``, ``semantic_sha256``) by the build.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "paper_vectors",
        sa.Column("paper_id", sa.Text(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["paper_id"], ["papers.id"], name=op.f("fk_paper_vectors_paper_id_papers")),
        sa.PrimaryKeyConstraint("paper_id", name=op.f("pk_paper_vectors")),
        sqlite_with_rowid=False,
    )
    op.execute("UPDATE index_info SET value = '0009' WHERE key = 'schema_revision'")


def downgrade() -> None:
    op.execute("UPDATE index_info SET value = '0008' WHERE key = 'schema_revision'")
    op.execute("DELETE FROM index_info WHERE key IN ('semantic_model', 'semantic_dims', 'semantic_sha256')")
    op.drop_table("paper_vectors")
