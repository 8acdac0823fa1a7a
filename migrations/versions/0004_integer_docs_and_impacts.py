"""integer document ids and per-posting impacts: postings keyed by (term_id, doc_id), bounded for pruning

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29 00:00:00

``doc_len`` gives every paper an integer ``doc_id`` (in paper-id order for an upgraded file) beside its ``paper_id``
and length; ``term_freq`` is keyed by ``(term_id, doc_id)`` and carries the paper's length (so scoring a posting
needs no lookup) and ``impact``, an upper bound (in thousandths) of the posting's BM25 term-frequency factor at the
average length recorded as ``impact_avgdl``; a partial index reads the postings with impact >= 1250 by impact;
``doc_freq`` carries each term's largest impact; ``cited_counts`` keeps each paper's in-degree. Scores are
still computed exactly from ``count`` and ``length``: impacts only let a query skip papers that provably cannot
reach its top k.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out here rather than imported, so this revision stays what it was when later code changes.
TERM_COUNTS_VIEW = """
CREATE VIEW term_counts AS
SELECT d.term AS term,
       l.paper_id AS paper_id,
       t.count AS count,
       t.impact AS impact
FROM term_freq AS t
JOIN doc_freq AS d ON d.term_id = t.term_id
JOIN doc_len AS l ON l.doc_id = t.doc_id
"""

TERM_COUNTS_VIEW_0001 = """
CREATE VIEW term_counts AS
SELECT d.term AS term,
       t.paper_id AS paper_id,
       t.count AS count
FROM term_freq AS t
JOIN doc_freq AS d ON d.term_id = t.term_id
"""

_INFO = "(SELECT CAST(value AS REAL) FROM index_info WHERE key = '{}')"
# 1000 * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)), rounded up (SQLite may lack ceil()).
_TF_NORM = (
    f"1000.0 * o.count * ({_INFO.format('k1')} + 1.0) / (o.count + {_INFO.format('k1')} * "
    f"(1.0 - {_INFO.format('b')} + {_INFO.format('b')} * l.length / {_INFO.format('avgdl')}))"
)
IMPACT_EXPR = f"CAST({_TF_NORM} AS INTEGER) + (({_TF_NORM}) > CAST({_TF_NORM} AS INTEGER))"
# PostgreSQL has ceil(), and no integer + boolean.
IMPACT_EXPR_POSTGRESQL = f"CAST(ceil({_TF_NORM.replace('AS REAL', 'AS DOUBLE PRECISION')}) AS INTEGER)"


def upgrade() -> None:
    impact = IMPACT_EXPR_POSTGRESQL if op.get_context().dialect.name == "postgresql" else IMPACT_EXPR
    op.execute("DROP VIEW IF EXISTS term_counts")
    op.rename_table("doc_len", "doc_len_0003")
    op.rename_table("term_freq", "term_freq_0003")
    if op.get_context().dialect.name == "postgresql" and not op.get_context().as_sql:
        # PostgreSQL names a key's index after the constraint, once per schema: the old tables' keys give way.
        for table in ("doc_len_0003", "term_freq_0003"):
            names = op.get_bind().execute(
                sa.text(
                    "SELECT conname FROM pg_constraint WHERE conrelid = CAST(:t AS regclass) AND contype IN ('p', 'u')"
                ),
                {"t": table},
            )
            for (name,) in names.fetchall():
                op.execute(f'ALTER TABLE {table} RENAME CONSTRAINT "{name}" TO "{name}_0003"')
    op.create_table(
        "doc_len",
        sa.Column("doc_id", sa.Integer(), nullable=False),
        sa.Column("paper_id", sa.Text(), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["paper_id"], ["papers.id"], name=op.f("fk_doc_len_paper_id_papers")),
        sa.PrimaryKeyConstraint("doc_id", name=op.f("pk_doc_len")),
        sa.UniqueConstraint("paper_id", name=op.f("uq_doc_len_paper_id")),
    )
    op.create_table(
        "term_freq",
        sa.Column("term_id", sa.Integer(), nullable=False),
        sa.Column("doc_id", sa.Integer(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.Column("impact", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["term_id"], ["doc_freq.term_id"], name=op.f("fk_term_freq_term_id_doc_freq")),
        sa.ForeignKeyConstraint(["doc_id"], ["doc_len.doc_id"], name=op.f("fk_term_freq_doc_id_doc_len")),
        sa.PrimaryKeyConstraint("term_id", "doc_id", name=op.f("pk_term_freq")),
        sqlite_with_rowid=False,
    )
    op.execute(
        "INSERT INTO doc_len (doc_id, paper_id, length) "
        "SELECT row_number() OVER (ORDER BY paper_id), paper_id, length FROM doc_len_0003"
    )
    op.execute(
        "INSERT INTO term_freq (term_id, doc_id, count, length, impact) "
        f"SELECT o.term_id, l.doc_id, o.count, l.length, {impact} "
        "FROM term_freq_0003 AS o JOIN doc_len AS l ON l.paper_id = o.paper_id "
        "ORDER BY o.term_id, l.doc_id"
    )
    # The head of each term's postings (tf_norm >= 1.25, typically a term repeated in a paper), read by impact.
    op.create_index(
        "ix_term_freq_head",
        "term_freq",
        ["term_id", "impact", "count", "length"],
        unique=False,
        sqlite_where=sa.text("impact >= 1250"),
        postgresql_where=sa.text("impact >= 1250"),
    )
    op.drop_table("term_freq_0003")
    op.drop_table("doc_len_0003")
    with op.batch_alter_table("doc_freq") as batch:
        batch.add_column(sa.Column("max_impact", sa.Integer(), server_default="0", nullable=False))
    op.execute(
        "UPDATE doc_freq SET max_impact = "
        "coalesce((SELECT max(t.impact) FROM term_freq AS t WHERE t.term_id = doc_freq.term_id), 0)"
    )
    op.execute("INSERT INTO index_info (key, value) SELECT 'impact_avgdl', value FROM index_info WHERE key = 'avgdl'")
    op.create_table(
        "cited_counts",
        sa.Column("paper_id", sa.Text(), nullable=False),
        sa.Column("cited_by", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("paper_id", name=op.f("pk_cited_counts")),
        sqlite_with_rowid=False,
    )
    op.execute(
        "INSERT INTO cited_counts (paper_id, cited_by) SELECT cited_id, count(*) FROM citations GROUP BY cited_id"
    )
    op.execute(TERM_COUNTS_VIEW)
    op.execute("UPDATE index_info SET value = '0004' WHERE key = 'schema_revision'")


def downgrade() -> None:
    op.execute("UPDATE index_info SET value = '0003' WHERE key = 'schema_revision'")
    op.execute("DELETE FROM index_info WHERE key = 'impact_avgdl'")
    op.execute("DROP VIEW IF EXISTS term_counts")
    op.drop_table("cited_counts")
    with op.batch_alter_table("doc_freq") as batch:
        batch.drop_column("max_impact")
    op.drop_index("ix_term_freq_head", table_name="term_freq")
    op.rename_table("term_freq", "term_freq_0004")
    op.rename_table("doc_len", "doc_len_0004")
    op.create_table(
        "term_freq",
        sa.Column("term_id", sa.Integer(), nullable=False),
        sa.Column("paper_id", sa.Text(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["term_id"], ["doc_freq.term_id"], name=op.f("fk_term_freq_term_id_doc_freq")),
        sa.ForeignKeyConstraint(["paper_id"], ["papers.id"], name=op.f("fk_term_freq_paper_id_papers")),
        sa.PrimaryKeyConstraint("term_id", "paper_id", name=op.f("pk_term_freq")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "doc_len",
        sa.Column("paper_id", sa.Text(), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["paper_id"], ["papers.id"], name=op.f("fk_doc_len_paper_id_papers")),
        sa.PrimaryKeyConstraint("paper_id", name=op.f("pk_doc_len")),
        sqlite_with_rowid=False,
    )
    op.execute("INSERT INTO doc_len (paper_id, length) SELECT paper_id, length FROM doc_len_0004")
    op.execute(
        "INSERT INTO term_freq (term_id, paper_id, count) "
        "SELECT t.term_id, l.paper_id, t.count FROM term_freq_0004 AS t JOIN doc_len_0004 AS l ON l.doc_id = t.doc_id"
    )
    op.drop_table("term_freq_0004")
    op.drop_table("doc_len_0004")
    op.execute(TERM_COUNTS_VIEW_0001)
