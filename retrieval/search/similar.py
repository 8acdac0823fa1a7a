"""Papers like these: co-citation, bibliographic coupling and text similarity to one paper or a reading list.

For seed papers S and a candidate c (any other paper of the corpus), three signals, each in [0, 1]:

- ``cocitation``: papers that cite both a seed s and c, as Salton's cosine ``together / sqrt(in(s) * in(c))``
  (``in`` counts the citation rows naming a paper as cited, ``cited_counts``), averaged over the seeds. Two
  papers that others keep citing together are about the same thing (Small, 1973). A seed cited by more than
  ``COCITATION_FANOUT`` papers is read through an even sample of them, every k-th by id, and ``together`` scaled
  up by how many there are (``cocitation_estimate``), as the expansion's ``fanout`` caps its co-citation: a hub's
  every citing paper would cost ten times an ordinary paper's work. Measured on hepth (hold-out-one-paper, 200
  dev papers): the same nDCG@10 as reading them all, 91% of the top 10 the same.
- ``coupling``: references that s and c share (in the corpus or not), as ``shared / sqrt(out(s) * out(c))``,
  averaged over the seeds (Kessler's bibliographic coupling, 1963).
- ``text``: BM25 of c for the seeds' titles and abstracts taken as one query (exact, ``retrieval.search.lexical``),
  over the best such score among the candidates.

``score = W_COCITATION * cocitation + W_COUPLING * coupling + W_TEXT * text`` (a third each: the graph
signals say what the field reads together, the text what is written alike, and a new paper with no citations yet
is still found by its text). The seeds themselves and ``exclude`` never appear; ties break on paper id. This is
the idea behind Connected Papers' graph, computed exactly over this index, each result with its reasons.
"""

from __future__ import annotations

import json
import math
import time

from ..bm25 import SCORE_DECIMALS
from ..corpus.paper import Paper
from ..errors import PaperNotFoundError
from ..store.sql.dialect import statement
from ..store.sql.executor import Snapshot
from ..validate import quoted
from . import lexical
from .blend import reorder
from .filters import Filters, failing, passing
from .papers import CANDIDATES_SQL, PAPERS_SQL, checked_counts
from .query import MAX_QUERY_CHARS, Query

#: Weights of the three signals.
W_COCITATION = 1.0 / 3.0
W_COUPLING = 1.0 / 3.0
W_TEXT = 1.0 / 3.0
#: How many papers the text signal ranks (the seeds' text as one query).
TEXT_DEPTH = 200

#: The most citing papers whose references co-citation reads per seed (as the expansion's ``fanout``): a paper
#: cited 2,414 times (hepth's most cited) would otherwise read some 70,000 citation rows and rank some 9,000
#: candidates, ten times an ordinary paper's work. Beyond it, an even sample (every k-th citing paper by id, so
#: every period of the citing literature is read) stands for them all (``cocitation_estimate``).
COCITATION_FANOUT = 100

COCITED_SQL = statement(
    lambda d: (
        f"""\
WITH citers AS (
    SELECT s.value AS seed,
           c1.citing_id AS citer,
           row_number() OVER (PARTITION BY s.value ORDER BY c1.citing_id{d.bytes_order}) AS position,
           count(*) OVER (PARTITION BY s.value) AS citing
    FROM {d.rows("seeds", "s")}
    {d.cross_join} citations AS c1 ON c1.cited_id = s.value
),
sampled AS (
    SELECT seed,
           citer,
           citing
    FROM citers
    WHERE :fanout <= 0
       OR (position - 1) % ((citing + :fanout - 1) / :fanout) = 0
)
SELECT r.seed,
       c2.cited_id AS paper_id,
       count(*) AS together,
       max(r.citing) AS citing
FROM sampled AS r
{d.cross_join} citations AS c2 ON c2.citing_id = r.citer
WHERE c2.cited_id <> r.seed
GROUP BY r.seed, c2.cited_id"""
    )
)


def sample_size(citing: int, fanout: int | None) -> int:
    """How many of a seed's ``citing`` papers ``COCITED_SQL`` reads: all of them up to ``fanout`` (None: no cap),
    else every k-th, ``k = ceil(citing / fanout)``, which is ``ceil(citing / k)`` (at most ``fanout``)."""
    if not fanout or fanout <= 0 or citing <= fanout:
        return citing
    step = -(-citing // fanout)
    return -(-citing // step)


def cocitation_estimate(together: int, citing: int, read: int, cited_by: int) -> float:
    """How many papers cite both a seed and a candidate, from ``together`` of the ``read`` citing papers of the
    seed's ``citing`` that were read: scaled up by ``citing / read``, and never more than either paper's citing
    papers (a candidate cited 3 times, met once in a sample of 1 in 24, is co-cited at most 3 times, not 24)."""
    if read >= citing:
        return float(together)
    return float(min(together * citing / read, cited_by, citing))


COUPLED_SQL = statement(
    lambda d: (
        f"""\
SELECT s.value AS seed,
       c2.citing_id AS paper_id,
       count(*) AS shared
FROM {d.rows("seeds", "s")}
{d.cross_join} citations AS c1 ON c1.citing_id = s.value
{d.cross_join} citations AS c2 ON c2.cited_id = c1.cited_id
WHERE c2.citing_id <> s.value
GROUP BY s.value, c2.citing_id"""
    )
)

DEGREES_SQL = statement(
    lambda d: (
        f"""\
SELECT j.value AS paper_id,
       coalesce((SELECT n.cited_by FROM cited_counts AS n WHERE n.paper_id = j.value), 0) AS cited_by,
       (SELECT count(*) FROM citations AS c WHERE c.citing_id = j.value) AS cites
FROM {d.rows("paper_ids", "j")}"""
    )
)


class SimilarPaper:
    """One paper like the seeds, with its three signals and the seeds it is tied to."""

    __slots__ = ("paper", "score", "cocitation", "coupling", "text", "together", "shared", "citations", "estimated")

    def __init__(self, paper: Paper, cocitation: float, coupling: float, text: float, together: dict, shared: dict):
        self.paper = paper
        self.cocitation = cocitation
        self.coupling = coupling
        self.text = text
        self.score = W_COCITATION * cocitation + W_COUPLING * coupling + W_TEXT * text
        self.together = together  # seed -> papers citing both
        self.shared = shared  # seed -> references in common
        self.citations: int | None = None  # papers of the index citing it
        self.estimated: frozenset[str] = frozenset()  # seeds whose co-citation counts are estimated from a sample

    def __repr__(self) -> str:
        return f"SimilarPaper({self.paper.id!r}, score={self.score:.4f})"

    def why(self) -> str:
        """One line: each signal, its weighted part, and the counts behind the graph signals."""
        parts = []
        if self.together:
            counts = ", ".join(
                f"{'~' if seed in self.estimated else ''}{n} with {seed}"
                for seed, n in sorted(self.together.items())[:3]
            )
            parts.append(f"co-cited {counts} ({self.cocitation:.3f})")
        if self.shared:
            counts = ", ".join(f"{n} with {seed}" for seed, n in sorted(self.shared.items())[:3])
            parts.append(f"shared references {counts} ({self.coupling:.3f})")
        parts.append(f"text {self.text:.3f}")
        return "; ".join(parts) + f" -> {self.score:.4f}"

    def to_dict(self) -> dict:
        return {
            "id": self.paper.id,
            "title": self.paper.title,
            "year": self.paper.year,
            "authors": list(self.paper.authors),
            "score": self.score,
            "cocitation": self.cocitation,
            "coupling": self.coupling,
            "text": self.text,
            "cocited_with": dict(sorted(self.together.items())),
            "shared_references_with": dict(sorted(self.shared.items())),
            "citations": self.citations,
            "why": self.why(),
        }


class SimilarResult:
    """Papers like ``seeds``, best first, from ``offset`` on; ``matched`` papers had any signal at all."""

    def __init__(self, seeds, ranked, matched, wall_time_ms, offset=0, warnings=None, filters=None) -> None:
        self.seeds = seeds
        self.ranked = ranked
        self.matched = matched
        self.wall_time_ms = wall_time_ms
        self.offset = offset
        self.warnings = [] if warnings is None else warnings
        self.filters = filters
        #: seed -> ``{"citing": n, "read": r}`` for each seed whose co-citations were counted over an even sample of
        #: r of its n citing papers (``COCITATION_FANOUT``) and scaled up; empty when every citing paper was read.
        self.cocitation_read: dict[str, dict[str, int]] = {}

    def __repr__(self) -> str:
        return f"SimilarResult({self.seeds!r}, {len(self.ranked)} of {self.matched})"

    def to_dict(self) -> dict:
        return {
            "seeds": list(self.seeds),
            "results": [{"rank": i, **e.to_dict()} for i, e in enumerate(self.ranked, start=self.offset + 1)],
            "offset": self.offset,
            "matched": self.matched,
            "filters": None if not self.filters else self.filters.to_dict(),
            "warnings": list(self.warnings),
            "cocitation_read": dict(self.cocitation_read),
            "metrics": {"wall_time_ms": self.wall_time_ms},
        }


def similar(
    snap: Snapshot,
    seeds: list[str],
    limit: int = 10,
    offset: int = 0,
    exclude: set[str] | frozenset[str] = frozenset(),
    filters: Filters | None = None,
    sort: str | None = None,
    fanout: int | None = COCITATION_FANOUT,
) -> SimilarResult:
    """The papers most like ``seeds`` (see the module docstring), ``limit`` from ``offset`` on, without the seeds
    and ``exclude``, among those passing ``filters``, in the order ``sort`` asks (``retrieval.search.blend.reorder``:
    relevance, citations or year). An id not in the index is an ``InputError``. Co-citation reads at most ``fanout``
    citing papers per seed (None: all of them; see ``COCITATION_FANOUT``); ``result.cocitation_read`` says of
    which seeds a sample was read, and how large."""
    start = time.perf_counter()
    seeds = list(dict.fromkeys(seeds))
    rows = snap.rows("similar: the seed papers", PAPERS_SQL, {"paper_ids": json.dumps(seeds)})
    found = {pid: (title, abstract, year) for pid, title, abstract, year in rows}
    unknown = [pid for pid in seeds if pid not in found]
    if unknown:
        shown = ", ".join(quoted(pid) for pid in unknown[:5]) + (
            f" and {len(unknown) - 5:,} more" if len(unknown) > 5 else ""
        )
        raise PaperNotFoundError(f"no paper {shown} in the index: give ids as `retrieval search` shows them")
    params = {"seeds": json.dumps(seeds)}
    together: dict[str, dict[str, int]] = {}  # of the citing papers read
    citing: dict[str, int] = {}
    sample = {**params, "fanout": fanout or 0}
    for seed, pid, n, count in snap.rows("similar: co-cited papers", COCITED_SQL, sample):
        together.setdefault(pid, {})[seed] = n
        citing[seed] = count
    read = {seed: sample_size(count, fanout) for seed, count in citing.items()}
    estimated = frozenset(seed for seed in citing if read[seed] < citing[seed])
    shared: dict[str, dict[str, int]] = {}
    for seed, pid, n in snap.rows("similar: papers sharing references", COUPLED_SQL, params):
        shared.setdefault(pid, {})[seed] = n
    text = " ".join(f"{found[s][0]} {found[s][1]}" for s in seeds)[:MAX_QUERY_CHARS]
    wq = lexical.weigh(snap, Query.parse(text))
    hits, _ = lexical.top_papers(snap, wq, TEXT_DEPTH + len(seeds) + len(exclude))
    skip = set(seeds) | set(exclude)
    text_scores = {pid: score for pid, score in hits if pid not in skip}
    best = max(text_scores.values(), default=0.0)
    pool = [pid for pid in dict.fromkeys([*together, *shared, *text_scores]) if pid not in skip]
    papers = {
        pid: Paper(pid, title, year=year, source="merged")
        for pid, title, year in snap.rows("similar: the candidates", CANDIDATES_SQL, {"paper_ids": json.dumps(pool)})
    }
    pool = [pid for pid in pool if pid in papers]  # co-cited or shared ids outside the corpus are not results
    if filters and pool:
        rejected = set(failing(snap, pool, passing(snap, filters)))
        pool = [pid for pid in pool if pid not in rejected]
    degree_ids = json.dumps(sorted(set(pool) | set(seeds)))
    degrees = {
        pid: (ins, outs) for pid, ins, outs in snap.rows("similar: degrees", DEGREES_SQL, {"paper_ids": degree_ids})
    }
    checked_counts(snap, {pid: ins for pid, (ins, _) in degrees.items()})
    ranked = []
    for pid in pool:
        ins, outs = degrees.get(pid, (0, 0))
        cocited = {s: cocitation_estimate(n, citing[s], read[s], ins) for s, n in together.get(pid, {}).items()}
        cocitation = sum(n / math.sqrt(max(1, degrees[s][0]) * max(1, ins)) for s, n in cocited.items())
        coupling = sum(n / math.sqrt(max(1, degrees[s][1]) * max(1, outs)) for s, n in shared.get(pid, {}).items())
        text_part = text_scores.get(pid, 0.0) / best if best > 0 else 0.0
        entry = SimilarPaper(
            papers[pid], cocitation / len(seeds), coupling / len(seeds), text_part,
            {s: round(n) for s, n in cocited.items()}, shared.get(pid, {}),
        )  # fmt: skip
        if estimated:
            entry.estimated = estimated & cocited.keys()
        ranked.append(entry)
    ranked.sort(key=lambda e: (-round(e.score, SCORE_DECIMALS), e.paper.id))  # last-bit sums tie on id
    for entry in ranked:
        entry.citations = degrees.get(entry.paper.id, (0, 0))[0]
    ranked = reorder(ranked, sort, {e.paper.id: e.citations for e in ranked})
    warnings = []
    if not together and not shared:
        warnings.append("the seeds have no citations in the index: ranked by text similarity only")
    page = ranked[offset : offset + limit]
    wall = (time.perf_counter() - start) * 1000.0
    result = SimilarResult(seeds, page, len(ranked), wall, offset, warnings, filters)
    result.cocitation_read = {seed: {"citing": citing[seed], "read": read[seed]} for seed in sorted(estimated)}
    return result
