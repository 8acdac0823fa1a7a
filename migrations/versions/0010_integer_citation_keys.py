"""integer citation keys: ``citation_links`` holds two numbers per citation, ``paper_keys`` the ids they stand for

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05 00:00:00

The ``citations`` table held each reference's two paper ids as text, twice (its rows and its index by cited
paper). Each id a citation names is now numbered once in ``paper_keys``; ``citation_links`` keeps the numbers and
the two flags, and the view ``citations`` shows them as before (``citing_id``, ``cited_id``, the flags), so every
statement that read the table reads the view unchanged. The numbers are given in id order.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CITATIONS_VIEW = """
CREATE VIEW citations AS
SELECT citing.paper_id AS citing_id,
       cited.paper_id AS cited_id,
       l.listed_by_citing AS listed_by_citing,
       l.listed_by_cited AS listed_by_cited
FROM citation_links AS l
JOIN paper_keys AS citing ON citing.key = l.citing_key
JOIN paper_keys AS cited ON cited.key = l.cited_key
"""

NUMBER_IDS = """
INSERT INTO paper_keys (key, paper_id)
SELECT row_number() OVER (ORDER BY ids.paper_id), ids.paper_id
FROM (SELECT citing_id AS paper_id FROM citations
      UNION
      SELECT cited_id FROM citations) AS ids
"""

LINK = """
INSERT INTO citation_links (citing_key, cited_key, listed_by_citing, listed_by_cited)
SELECT citing.key, cited.key, c.listed_by_citing, c.listed_by_cited
FROM citations AS c
JOIN paper_keys AS citing ON citing.paper_id = c.citing_id
JOIN paper_keys AS cited ON cited.paper_id = c.cited_id
ORDER BY citing.key, cited.key
"""

# The rows the view shows, kept aside while the tables behind it go.
SET_ASIDE = """
CREATE TABLE citations_0010 AS
SELECT citing_id, cited_id, listed_by_citing, listed_by_cited
FROM citations
"""

UNLINK = """
INSERT INTO citations (citing_id, cited_id, listed_by_citing, listed_by_cited)
SELECT citing_id, cited_id, listed_by_citing, listed_by_cited
FROM citations_0010
ORDER BY citing_id, cited_id
"""


def _flags() -> list[sa.Column]:
    return [
        sa.Column("listed_by_citing", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("listed_by_cited", sa.Boolean(), server_default=sa.false(), nullable=False),
    ]


# No table is renamed either way: SQLite's rename rewrites a user's own views that read ``citations`` to read the
# renamed table, which then goes. The table (or view) is dropped and its successor made under the same name, so
# such a view reads the successor.
def upgrade() -> None:
    op.create_table(
        "paper_keys",
        sa.Column("key", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("paper_id", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_paper_keys")),
    )
    op.create_index("ix_paper_keys_paper_id", "paper_keys", ["paper_id"], unique=True)
    op.create_table(
        "citation_links",
        sa.Column("citing_key", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("cited_key", sa.Integer(), autoincrement=False, nullable=False),
        *_flags(),
        sa.PrimaryKeyConstraint("citing_key", "cited_key", name=op.f("pk_citation_links")),
        sqlite_with_rowid=False,
    )
    op.execute(NUMBER_IDS)
    op.execute(LINK)
    op.create_index("ix_citation_links_cited_citing", "citation_links", ["cited_key", "citing_key"])
    op.drop_index("ix_citations_cited_citing", table_name="citations")
    op.drop_table("citations")
    op.execute(CITATIONS_VIEW)
    op.execute("UPDATE index_info SET value = '0010' WHERE key = 'schema_revision'")


def downgrade() -> None:
    op.execute("UPDATE index_info SET value = '0009' WHERE key = 'schema_revision'")
    op.execute(SET_ASIDE)
    op.execute("DROP VIEW citations")
    op.drop_index("ix_citation_links_cited_citing", table_name="citation_links")
    op.drop_table("citation_links")
    op.drop_index("ix_paper_keys_paper_id", table_name="paper_keys")
    op.drop_table("paper_keys")
    op.create_table(
        "citations",
        sa.Column("citing_id", sa.Text(), nullable=False),
        sa.Column("cited_id", sa.Text(), nullable=False),
        *_flags(),
        sa.PrimaryKeyConstraint("citing_id", "cited_id", name=op.f("pk_citations")),
        sqlite_with_rowid=False,
    )
    op.execute(UNLINK)
    op.drop_table("citations_0010")
    op.create_index("ix_citations_cited_citing", "citations", ["cited_id", "citing_id"])
