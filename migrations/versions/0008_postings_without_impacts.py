"""postings without impacts: ``term_freq`` keeps (term, document, count); the bounds come from ``postings``

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 00:00:00

A term's bound is now the largest tf_norm its ``postings`` chunks allow (exact at any average length), so the
per-posting ``impact``, each term's ``max_impact`` and the ``impact_avgdl`` they were written at go; so does
``term_freq.length``, which repeated ``doc_len.length`` on every posting (a scoring statement joins ``doc_len``).
The ``term_counts`` view read ``impact``: it is made again without it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TERM_COUNTS_VIEW = """
CREATE VIEW term_counts AS
SELECT d.term AS term,
       l.paper_id AS paper_id,
       t.count AS count
FROM term_freq AS t
JOIN doc_freq AS d ON d.term_id = t.term_id
JOIN doc_len AS l ON l.doc_id = t.doc_id
"""

TERM_COUNTS_VIEW_0007 = """
CREATE VIEW term_counts AS
SELECT d.term AS term,
       l.paper_id AS paper_id,
       t.count AS count,
       t.impact AS impact
FROM term_freq AS t
JOIN doc_freq AS d ON d.term_id = t.term_id
JOIN doc_len AS l ON l.doc_id = t.doc_id
"""

_INFO = "(SELECT CAST(value AS REAL) FROM index_info WHERE key = '{}')"
# 0007's impacts, at today's average: 1000 * tf_norm rounded up (SQLite may lack ceil(): the integer part, plus
# one where there is a fraction).
_TF_NORM = (
    f"1000.0 * count * ({_INFO.format('k1')} + 1.0) / (count + {_INFO.format('k1')} * "
    f"(1.0 - {_INFO.format('b')} + {_INFO.format('b')} * length / {_INFO.format('avgdl')}))"
)
IMPACT_EXPR = f"CAST({_TF_NORM} AS INTEGER) + (({_TF_NORM}) > CAST({_TF_NORM} AS INTEGER))"
IMPACT_EXPR_POSTGRESQL = f"CAST(ceil({_TF_NORM.replace('AS REAL', 'AS DOUBLE PRECISION')}) AS INTEGER)"


def upgrade() -> None:
    # ALTER TABLE ... DROP COLUMN in place on both (SQLite 3.35 and later): term_freq stays WITHOUT ROWID, which a
    # batch copy through reflection would not promise. SQLite checks the schema after each drop, so the view that
    # reads a dropped column goes first.
    op.execute("DROP VIEW IF EXISTS term_counts")
    op.execute("ALTER TABLE term_freq DROP COLUMN impact")
    op.execute("ALTER TABLE term_freq DROP COLUMN length")
    op.execute("ALTER TABLE doc_freq DROP COLUMN max_impact")
    op.execute(TERM_COUNTS_VIEW)
    op.execute("DELETE FROM index_info WHERE key = 'impact_avgdl'")
    op.execute("UPDATE index_info SET value = '0008' WHERE key = 'schema_revision'")


def downgrade() -> None:
    postgresql = op.get_context().dialect.name == "postgresql"
    op.execute("UPDATE index_info SET value = '0007' WHERE key = 'schema_revision'")
    op.execute("DROP VIEW IF EXISTS term_counts")
    op.add_column("doc_freq", sa.Column("max_impact", sa.Integer(), server_default="0", nullable=False))
    op.add_column("term_freq", sa.Column("length", sa.Integer(), server_default="0", nullable=False))
    op.add_column("term_freq", sa.Column("impact", sa.Integer(), server_default="0", nullable=False))
    op.execute("UPDATE term_freq SET length = (SELECT l.length FROM doc_len AS l WHERE l.doc_id = term_freq.doc_id)")
    op.execute(f"UPDATE term_freq SET impact = {IMPACT_EXPR_POSTGRESQL if postgresql else IMPACT_EXPR}")
    op.execute(
        "UPDATE doc_freq SET max_impact = "
        "coalesce((SELECT max(t.impact) FROM term_freq AS t WHERE t.term_id = doc_freq.term_id), 0)"
    )
    op.execute("INSERT INTO index_info (key, value) SELECT 'impact_avgdl', value FROM index_info WHERE key = 'avgdl'")
    op.execute(TERM_COUNTS_VIEW_0007)
