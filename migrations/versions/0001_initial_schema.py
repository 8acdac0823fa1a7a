"""initial schema: papers, authors, citations, BM25 statistics, index info

Revision ID: 0001
Revises:
Create Date: 2026-11-29 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Written out here rather than imported, so this revision stays what it was when later models change.
TERM_COUNTS_VIEW = """
CREATE VIEW term_counts AS
SELECT d.term AS term,
       t.paper_id AS paper_id,
       t.count AS count
FROM term_freq AS t
JOIN doc_freq AS d ON d.term_id = t.term_id
"""


def upgrade() -> None:
    op.create_table(
        "papers",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("abstract", sa.Text(), nullable=False),
        sa.Column("year", sa.Integer(), nullable=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_papers")),
    )
    op.create_table(
        "paper_authors",
        sa.Column("paper_id", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["paper_id"], ["papers.id"], name=op.f("fk_paper_authors_paper_id_papers")),
        sa.PrimaryKeyConstraint("paper_id", "position", name=op.f("pk_paper_authors")),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_paper_authors_name", "paper_authors", ["name"], unique=False)
    op.create_table(
        "citations",
        sa.Column("citing_id", sa.Text(), nullable=False),
        sa.Column("cited_id", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["citing_id"], ["papers.id"], name=op.f("fk_citations_citing_id_papers")),
        sa.PrimaryKeyConstraint("citing_id", "cited_id", name=op.f("pk_citations")),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_citations_cited_citing", "citations", ["cited_id", "citing_id"], unique=False)
    op.create_table(
        "doc_freq",
        sa.Column("term_id", sa.Integer(), nullable=False),
        sa.Column("term", sa.Text(), nullable=False),
        sa.Column("df", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("term_id", name=op.f("pk_doc_freq")),
        sa.UniqueConstraint("term", name=op.f("uq_doc_freq_term")),
    )
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
    op.create_table(
        "index_info",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_index_info")),
    )
    op.execute(TERM_COUNTS_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS term_counts")
    op.drop_table("index_info")
    op.drop_table("doc_len")
    op.drop_table("term_freq")
    op.drop_table("doc_freq")
    op.drop_index("ix_citations_cited_citing", table_name="citations")
    op.drop_table("citations")
    op.drop_index("ix_paper_authors_name", table_name="paper_authors")
    op.drop_table("paper_authors")
    op.drop_table("papers")
