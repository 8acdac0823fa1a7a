"""author keys: each author's folded surname and words, so that ``--author`` matches case and accents aside

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 00:00:00

``paper_authors`` gains ``surname`` (folded: "Schrödinger, E." and "E. Schr\\"odinger" both give
``schrodinger``) and ``name_key`` (every word of the name, folded, the surname last), and an index on
``surname``; existing rows are filled in from ``name``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


SELECT_NAMES = "SELECT paper_id, position, name FROM paper_authors"


def upgrade() -> None:
    # The package's own name folding, imported rather than copied: the keys must be what searches compute.
    from retrieval.corpus.names import name_key

    # ADD COLUMN in place (SQLite and PostgreSQL alike): no table copy, and the table stays WITHOUT ROWID.
    op.add_column("paper_authors", sa.Column("surname", sa.Text(), server_default="", nullable=False))
    op.add_column("paper_authors", sa.Column("name_key", sa.Text(), server_default="", nullable=False))
    # Offline (``alembic upgrade --sql``) there are no rows to read: the script adds the columns and leaves the
    # keys empty (a script shows the schema; an index is upgraded online, by ``retrieval upgrade``).
    rows = [] if op.get_context().as_sql else op.get_bind().execute(sa.text(SELECT_NAMES)).fetchall()
    if rows:
        conn = op.get_bind()
        conn.execute(
            sa.text("UPDATE paper_authors SET surname = :s, name_key = :k WHERE paper_id = :p AND position = :i"),
            [{"s": s, "k": k, "p": pid, "i": pos} for pid, pos, name in rows for s, k in [name_key(name)]],
        )
    op.create_index("ix_paper_authors_surname", "paper_authors", ["surname"], unique=False)
    op.execute("UPDATE index_info SET value = '0006' WHERE key = 'schema_revision'")


def downgrade() -> None:
    op.execute("UPDATE index_info SET value = '0005' WHERE key = 'schema_revision'")
    op.drop_index("ix_paper_authors_surname", table_name="paper_authors")
    with op.batch_alter_table("paper_authors") as batch:
        batch.drop_column("name_key")
        batch.drop_column("surname")
