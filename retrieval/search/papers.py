"""Reading papers by id: the statements that load what a result shows (titles and years for the blend; abstracts,
authors, references and citing papers for the entries returned), shared by search, ``similar`` and ``show``."""

from __future__ import annotations

import json

from ..corpus.paper import Paper
from ..errors import NotAnIndexError
from ..store.database import shown
from ..store.sql.dialect import register_sharded, statement
from ..store.sql.executor import Snapshot
from ..validate import quoted

# What the blend needs of every candidate; the rest is loaded for the returned entries only.
# In the list's order on both (SQLite's loop over json_each gives the rows so); ids ordered by their bytes.
CANDIDATES_SQL = statement(
    lambda d: (
        f"""\
SELECT p.id,
       p.title,
       p.year
FROM {d.numbered_rows("paper_ids", "j")}
JOIN papers AS p ON p.id = j.value{d.in_list_order("j")}"""
    )
)
# A sharded index's coordinator: the papers read once, by the id array, then put in the list's order.
_IDS_SHARDED = """\
WITH j AS MATERIALIZED (
    SELECT value,
           position
    FROM jsonb_array_elements_text(CAST(:paper_ids AS jsonb)) WITH ORDINALITY AS j (value, position)
),"""
CANDIDATES_SQL_SHARDED = f"""\
{_IDS_SHARDED}
p AS MATERIALIZED (
    SELECT p.id,
           p.title,
           p.year
    FROM papers AS p
    WHERE p.id = ANY (ARRAY(SELECT value FROM j))
)
SELECT p.id,
       p.title,
       p.year
FROM j
JOIN p ON p.id = j.value
ORDER BY j.position"""
register_sharded(CANDIDATES_SQL, CANDIDATES_SQL_SHARDED)


def candidate_papers(snap: Snapshot, paper_ids: list[str], name: str) -> dict[str, Paper]:
    """The titles and years of ``paper_ids`` (``CANDIDATES_SQL``), every one of them: an id the lexical or the graph
    pass gave that ``papers`` lacks (a row deleted by hand) is a damaged index, said so, never a crash."""
    rows = snap.rows(name, CANDIDATES_SQL, {"paper_ids": json.dumps(paper_ids)})
    papers = {pid: Paper(pid, title, year=year, source="merged") for pid, title, year in rows}
    missing = [pid for pid in paper_ids if pid not in papers]
    where = shown(snap.executor.path)
    stats = snap.stats
    for paper in papers.values():  # the ranking computes with years (recency, the seeds' era)
        year = paper.year
        if year is not None and (not isinstance(year, int) or isinstance(year, bool)):
            raise NotAnIndexError(
                f"{where} is damaged: papers.year of {quoted(paper.id)} is {quoted(str(year))}, not a year; "
                f"`retrieval check --db {where}` reports every problem, `retrieval build --db {where}` rebuilds it"
            )
        # Recency is scaled by the index's year range: a year outside it was written by hand, not by a writer.
        if year is not None and not (stats.min_year is not None and stats.min_year <= year <= stats.max_year):
            raise NotAnIndexError(
                f"{where} is damaged: papers.year of {quoted(paper.id)} is {year}, outside the years "
                f"{stats.min_year}-{stats.max_year} index_info gives; `retrieval check --db {where}` reports every "
                f"problem, `retrieval build --db {where}` rebuilds it"
            )
    if missing:
        more = f" and {len(missing) - 1:,} more" if len(missing) > 1 else ""
        raise NotAnIndexError(
            f"{where} is damaged: its postings name the paper {quoted(missing[0])}{more}, which the papers table "
            f"lacks; rebuild it with `retrieval build --db {where}`"
        )
    return papers


def checked_counts(snap: Snapshot, counts: dict[str, int], what: str = "cited_counts.cited_by") -> dict[str, int]:
    """``counts`` (paper id -> how many papers cite it, from ``cited_counts``), each a whole number of at least 0:
    a negative or a text count (edited by hand) is a damaged index, said so with the paper's id, never a
    logarithm of a negative number or a ranking over it."""
    for pid, count in counts.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            where = shown(snap.executor.path)
            raise NotAnIndexError(
                f"{where} is damaged: {what} of {quoted(pid)} is {quoted(str(count))}, not a count of citing papers; "
                f"`retrieval check --db {where}` reports every problem, `retrieval build --db {where}` rebuilds it"
            )
    return counts


PAPERS_SQL = statement(
    lambda d: (
        f"""\
SELECT p.id,
       p.title,
       p.abstract,
       p.year
FROM {d.numbered_rows("paper_ids", "j")}
JOIN papers AS p ON p.id = j.value{d.in_list_order("j")}"""
    )
)

ABSTRACTS_SQL = statement(
    lambda d: (
        f"""\
SELECT p.id,
       p.abstract
FROM {d.numbered_rows("paper_ids", "j")}
JOIN papers AS p ON p.id = j.value{d.in_list_order("j")}"""
    )
)
ABSTRACTS_SQL_SHARDED = f"""\
{_IDS_SHARDED}
p AS MATERIALIZED (
    SELECT p.id,
           p.abstract
    FROM papers AS p
    WHERE p.id = ANY (ARRAY(SELECT value FROM j))
)
SELECT p.id,
       p.abstract
FROM j
JOIN p ON p.id = j.value
ORDER BY j.position"""
register_sharded(ABSTRACTS_SQL, ABSTRACTS_SQL_SHARDED)

AUTHORS_SQL = statement(
    lambda d: (
        f"""\
SELECT a.paper_id,
       a.name
FROM {d.rows("paper_ids", "j")}
JOIN paper_authors AS a ON a.paper_id = j.value
ORDER BY a.paper_id{d.bytes_order}, a.position"""
    )
)
# (Each id once, as the PostgreSQL text joins each listed id once.)
AUTHORS_SQL_SHARDED = """\
SELECT a.paper_id,
       a.name
FROM paper_authors AS a
WHERE a.paper_id = ANY (ARRAY(SELECT value FROM jsonb_array_elements_text(CAST(:paper_ids AS jsonb))))
ORDER BY a.paper_id COLLATE "C", a.position"""
register_sharded(AUTHORS_SQL, AUTHORS_SQL_SHARDED)

REFERENCES_SQL = statement(
    lambda d: (
        f"""\
SELECT c.citing_id,
       c.cited_id
FROM {d.rows("paper_ids", "j")}
JOIN citations AS c ON c.citing_id = j.value
ORDER BY c.citing_id{d.bytes_order}, c.cited_id{d.bytes_order}"""
    )
)
REFERENCES_SQL_SHARDED = """\
SELECT c.citing_id,
       c.cited_id
FROM citations AS c
WHERE c.citing_id = ANY (ARRAY(SELECT value FROM jsonb_array_elements_text(CAST(:paper_ids AS jsonb))))
ORDER BY c.citing_id COLLATE "C", c.cited_id COLLATE "C\""""
register_sharded(REFERENCES_SQL, REFERENCES_SQL_SHARDED)

CITED_BY_SQL = statement(
    lambda d: (
        f"""\
SELECT c.cited_id,
       c.citing_id
FROM {d.rows("paper_ids", "j")}
JOIN citations AS c ON c.cited_id = j.value
JOIN papers AS p ON p.id = c.citing_id
ORDER BY c.cited_id{d.bytes_order}, c.citing_id{d.bytes_order}"""
    )
)
CITED_BY_SQL_SHARDED = """\
WITH c AS MATERIALIZED (
    SELECT c.cited_id,
           c.citing_id
    FROM citations AS c
    WHERE c.cited_id = ANY (ARRAY(SELECT value FROM jsonb_array_elements_text(CAST(:paper_ids AS jsonb))))
),
live AS MATERIALIZED (
    SELECT p.id
    FROM papers AS p
    WHERE p.id = ANY (ARRAY(SELECT DISTINCT citing_id FROM c))
)
SELECT c.cited_id,
       c.citing_id
FROM c
WHERE c.citing_id IN (SELECT id FROM live)
ORDER BY c.cited_id COLLATE "C", c.citing_id COLLATE "C\""""
register_sharded(CITED_BY_SQL, CITED_BY_SQL_SHARDED)


def add_links(snap: Snapshot, papers: dict[str, Paper], links: bool = True) -> None:
    """Fill in the authors, and with ``links`` the references and citing papers, of ``papers`` (one statement
    each). A much-cited paper has thousands of citing papers: a caller that shows none asks for no links."""
    if not papers:
        return
    ids = {"paper_ids": json.dumps(list(papers))}
    for pid, name in snap.rows("papers: authors", AUTHORS_SQL, ids):
        papers[pid].authors.append(name)
    if not links:
        return
    for pid, ref in snap.rows("papers: references", REFERENCES_SQL, ids):
        papers[pid].references.append(ref)
    for pid, citer in snap.rows("papers: citing papers", CITED_BY_SQL, ids):
        papers[pid].citations.append(citer)


class PaperPage:
    """One paper as ``retrieval show`` prints it: the paper (authors, references, citing papers) and ``linked``,
    the papers of the corpus among its references and citing papers (id -> ``Paper`` with title, year, authors)."""

    def __init__(self, paper: Paper, linked: dict[str, Paper]) -> None:
        self.paper = paper
        self.linked = linked

    def __repr__(self) -> str:
        return (
            f"PaperPage({self.paper.id!r}, {len(self.paper.references)} references, {len(self.paper.citations)} citing)"
        )

    def _links(self, ids: list[str]) -> list[dict]:
        out = []
        for pid in ids:
            other = self.linked.get(pid)
            out.append(
                {"id": pid, "in_corpus": other is not None, "title": other.title if other else None,
                 "year": other.year if other else None, "authors": list(other.authors) if other else []}
            )  # fmt: skip
        return out

    def to_dict(self) -> dict:
        data = self.paper.to_dict()
        data["references"] = self._links(self.paper.references)
        data["citations"] = self._links(self.paper.citations)
        return data
