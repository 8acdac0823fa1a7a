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
  over the best such score among the candidates, for the ``TEXT_DEPTH`` best papers other than the seeds and
  ``exclude`` (an excluded id that names no paper changes nothing) among those passing the filters.

``score = W_COCITATION * cocitation + W_COUPLING * coupling + W_TEXT * text`` (a third each: the graph
signals say what the field reads together, the text what is written alike, and a new paper with no citations yet
is still found by its text). The seeds themselves and ``exclude`` never appear; ties break on paper id. This is
the idea behind Connected Papers' graph, computed exactly over this index, each result with its reasons.

Only the candidates that can reach the page are scored in full (the best-bound-first evaluation of Fagin's
threshold algorithm, exact). A co-citation count n of a candidate c is at most in(c), so its cosine
``n / sqrt(in(s) * in(c))`` is at most ``sqrt(n / in(s))``; shared references likewise at most
``sqrt(shared / out(s))``; the text signal is known. Candidates are read (titles, degrees) best bound first, twice
the page, then every one whose bound still reaches the page's last score; the rest are only counted (``matched``,
from an even sample past ``MATCHED_EXACT_MAX``). A hub's references are cited by thousands (hepth's most cited
paper: 4,560 candidates, 38 of them scored), so this is what keeps its ``similar`` near an ordinary paper's.
Another ``sort`` than relevance scores them all.

The graph signals are read by statements (``CITERS_SQL``, ``COCITED_SQL``, ``COUPLED_SQL``) until the process
keeps the citation graph (``retrieval.search.adjacency``), then counted from its arrays, and the candidates'
bounds and the best-bound-first selection computed in arrays too (``kept_bounds``, ``select_kept``): the same
counts, so the same page; ``matched`` is then exact, since the graph knows every paper's id.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import time
from collections import Counter

from ..bm25 import BOUND_SLACK, SCORE_DECIMALS, TIE_SLACK
from ..corpus.paper import Paper
from ..errors import PaperNotFoundError
from ..store.sql.dialect import citations_by, register_sharded, statement
from ..store.sql.executor import Snapshot
from ..validate import quoted
from . import lexical
from .adjacency import GRAPHS
from .blend import reorder
from .filters import Filters, failing, passing
from .papers import CANDIDATES_SQL, PAPERS_SQL, checked_counts
from .query import MAX_QUERY_CHARS, MAX_QUERY_TERMS, Query

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


#: The graph signals come back as one JSON list of ids per seed, which Python counts (``collections.Counter``), from
#: a subquery per seed: on SQLite a ``GROUP BY``, of the ids or of the seed, sorts every row through a temporary
#: B-tree (three times the lists' cost for a hub). A seed without any gives no row (SQLite's empty list,
#: PostgreSQL's NULL: ``listed``). Co-citation, first: each seed's citing papers (ordered and sampled in Python: a
#: window function numbering a hub's citing papers took most of the statement's time).
CITERS_SQL = statement(
    lambda d: (
        f"""\
SELECT s.value AS seed,
       (SELECT {d.json_list("c1.citing_id")}
        FROM citations AS c1
        WHERE c1.cited_id = s.value) AS citers
FROM {d.rows("seeds", "s")}"""
    )
)

#: Co-citation, then: per seed, the references of its sampled citing papers (``sampled``: a JSON object, seed ->
#: its citing papers read), one id per citing paper naming it.
COCITED_SQL = statement(
    lambda d: (
        f"""\
SELECT s.key AS seed,
       (SELECT {d.json_list("c2.cited_id")}
        FROM {d.elements("s.value", "r")}
        {d.cross_join} citations AS c2 ON c2.citing_id = r.value
        WHERE c2.cited_id <> s.key) AS papers
FROM {d.entries("sampled", "s")}"""
    )
)

#: On a sharded index's coordinator a lookup per sampled citing paper is a round trip to each shard (a reading
#: list's 2,000 of them took seconds): their references are fetched at once by a key array, then hash-joined (as
#: a coordinator joins).
COCITED_SQL_SHARDED = f"""\
WITH sampled AS MATERIALIZED (
    SELECT s.key AS seed,
           r.value AS citer
    FROM jsonb_each(CAST(:sampled AS jsonb)) AS s (key, value)
    JOIN jsonb_array_elements_text(s.value) AS r (value) ON true
),
refs AS MATERIALIZED (
    SELECT c2.citing_id,
           c2.cited_id
    FROM {citations_by("citing", "SELECT citer FROM sampled", "c2")}
)
SELECT r.seed,
       CAST(json_agg(c2.cited_id) AS text) AS papers
FROM sampled AS r
JOIN refs AS c2 ON c2.citing_id = r.citer
WHERE c2.cited_id <> r.seed
GROUP BY r.seed"""
register_sharded(COCITED_SQL, COCITED_SQL_SHARDED)


def seeds_query(text: str, analyser) -> Query:
    """The seeds' titles and abstracts (``text``, at most ``MAX_QUERY_CHARS``) as one query, analysed as the index
    is: its first ``MAX_QUERY_TERMS`` distinct terms (in the seeds' order) where it has more, since the user gave
    papers, not a text to shorten."""
    tokens = analyser.analyse(text)
    kept = set(list(dict.fromkeys(tokens))[:MAX_QUERY_TERMS])
    return Query(text, tuple(t for t in tokens if t in kept), analyser, tuple(analyser.stopped(text)))


def sampled_citers(citers: list[str], fanout: int | None) -> list[str]:
    """The citing papers of a seed that co-citation reads: every k-th by id (its bytes: Python orders strings by
    code point, which is UTF-8's byte order, as ``COLLATE "C"`` and SQLite's binary collation), ``k = ceil(n /
    fanout)``; all of them up to ``fanout`` (None or 0: no cap)."""
    ordered = sorted(citers)
    if not fanout or fanout <= 0 or len(ordered) <= fanout:
        return ordered
    return ordered[:: -(-len(ordered) // fanout)]


def cocitation_estimate(together: int, citing: int, read: int, cited_by: int) -> float:
    """How many papers cite both a seed and a candidate, from ``together`` of the ``read`` citing papers of the
    seed's ``citing`` that were read: scaled up by ``citing / read``, and never more than either paper's citing
    papers (a candidate cited 3 times, met once in a sample of 1 in 24, is co-cited at most 3 times, not 24)."""
    if read >= citing:
        return float(together)
    return float(min(together * citing / read, cited_by, citing))


#: Coupling: per seed, the papers citing each of its references, one id per shared reference.
COUPLED_SQL = statement(
    lambda d: (
        f"""\
SELECT s.value AS seed,
       (SELECT {d.json_list("c2.citing_id")}
        FROM citations AS c1
        {d.cross_join} citations AS c2 ON c2.cited_id = c1.cited_id
        WHERE c1.citing_id = s.value
          AND c2.citing_id <> s.value) AS papers
FROM {d.rows("seeds", "s")}"""
    )
)

#: On a sharded index's coordinator, as ``COCITED_SQL_SHARDED``: the seeds' references, then the papers citing them,
#: each fetched at once by a key array (a reading list's lookups per reference cost a round trip to each shard),
#: gathered per reference before they meet the seeds' (a join of the rows themselves was planned as a nested loop
#: over thousands of them, its sizes unknown to the planner).
COUPLED_SQL_SHARDED = f"""\
WITH refs AS MATERIALIZED (
    SELECT c1.citing_id AS seed,
           c1.cited_id
    FROM {citations_by("citing", "SELECT jsonb_array_elements_text(CAST(:seeds AS jsonb))", "c1")}
),
citing AS MATERIALIZED (
    SELECT c2.cited_id,
           array_agg(c2.citing_id) AS citers
    FROM {citations_by("cited", "SELECT DISTINCT cited_id FROM refs", "c2")}
    GROUP BY c2.cited_id
)
SELECT r.seed,
       CAST(json_agg(x.citer) AS text) AS papers
FROM refs AS r
JOIN citing AS c ON c.cited_id = r.cited_id
CROSS JOIN LATERAL unnest(c.citers) AS x (citer)
WHERE x.citer <> r.seed
GROUP BY r.seed"""
register_sharded(COUPLED_SQL, COUPLED_SQL_SHARDED)

DEGREES_SQL = statement(
    lambda d: (
        f"""\
SELECT j.value AS paper_id,
       coalesce((SELECT n.cited_by FROM cited_counts AS n WHERE n.paper_id = j.value), 0) AS cited_by,
       (SELECT count(*) FROM citations AS c WHERE c.citing_id = j.value) AS cites
FROM {d.rows("paper_ids", "j")}"""
    )
)

#: On a sharded index's coordinator: the in-degrees and the reference counts fetched at once by a key array (a
#: subquery per paper is a round trip to each shard).
DEGREES_SQL_SHARDED = f"""\
WITH j AS MATERIALIZED (
    SELECT value
    FROM jsonb_array_elements_text(CAST(:paper_ids AS jsonb)) AS j (value)
),
n AS MATERIALIZED (
    SELECT n.paper_id,
           n.cited_by
    FROM cited_counts AS n
    WHERE n.paper_id = ANY (ARRAY(SELECT value FROM j))
),
o AS MATERIALIZED (
    SELECT c.citing_id,
           count(*) AS cites
    FROM {citations_by("citing", "SELECT value FROM j")}
    GROUP BY c.citing_id
)
SELECT j.value AS paper_id,
       coalesce(n.cited_by, 0) AS cited_by,
       coalesce(o.cites, 0) AS cites
FROM j
LEFT JOIN n ON n.paper_id = j.value
LEFT JOIN o ON o.citing_id = j.value"""
register_sharded(DEGREES_SQL, DEGREES_SQL_SHARDED)

#: ``matched`` counts the candidates not scored in full that are papers of the index (a co-cited paper or one
#: sharing a reference may be outside the corpus), a lookup each, up to this many whose status is unknown (those
#: from the text pass are papers); above it, from an even sample of ``MATCHED_SAMPLE`` of them (every k-th by
#: id), scaled up and said to be an estimate (``matched_exact``), as search's count is. A hub's 4,500 candidates
#: not scored would otherwise cost as much as the lexical pass.
MATCHED_EXACT_MAX = 1000
MATCHED_SAMPLE = 250

#: How many of the candidates not scored in full are papers of the index (``matched`` counts them).
MATCHED_SQL = statement(
    lambda d: (
        f"""\
SELECT count(*)
FROM {d.rows("paper_ids", "j")}
{d.cross_join} papers AS p ON p.id = j.value"""
    )
)


def listed(snap: Snapshot, name: str, sql: str, params: dict) -> dict[str, list]:
    """Seed -> its list of ids (``json_list``), for the seeds whose list is not empty."""
    return {seed: ids for seed, text in snap.rows(name, sql, params) if text and (ids := json.loads(text))}


def counted(snap: Snapshot, name: str, sql: str, params: dict) -> dict[str, Counter]:
    """Seed -> how many times each id is in its list (``listed``)."""
    return {seed: Counter(ids) for seed, ids in listed(snap, name, sql, params).items()}


def upper_bounds(
    together: dict[str, Counter], shared: dict[str, Counter], text: dict[str, float], n_seeds: int,
    citing: dict[str, int], read: dict[str, int], degrees: dict[str, tuple[int, int]],
) -> dict[str, float]:  # fmt: skip
    """Each candidate's score at most, from its counts alone (before its degrees are read): a co-citation count
    (or its estimate, never above the candidate's in-degree) ``n <= in(c)`` gives ``n / sqrt(in(s) * in(c)) <=
    sqrt(n / in(s))``; shared references ``<= out(c)`` give ``sqrt(shared / out(s))``; the text part is exact.
    With ``BOUND_SLACK``, so a last-bit difference in the sums never prunes a paper that ties."""
    up = 1.0 + BOUND_SLACK
    parts = [{pid: W_TEXT * up * part for pid, part in text.items()}]
    for signals, weight, degree in ((together, W_COCITATION, 0), (shared, W_COUPLING, 1)):
        for seed, counts in signals.items():
            per = weight * up / n_seeds / math.sqrt(max(1, degrees[seed][degree]))
            scale, cap = (citing[seed] / read[seed], citing[seed]) if signals is together else (1.0, math.inf)
            of = {n: per * math.sqrt(min(n * scale, cap)) for n in set(counts.values())}  # few distinct counts
            parts.append(dict(zip(counts, map(of.__getitem__, counts.values()), strict=True)))
    parts.sort(key=len, reverse=True)  # the others are added into the largest: a hub's lists run to thousands
    bounds = parts[0]
    get = bounds.get
    for part in parts[1:]:
        for pid, value in part.items():
            bounds[pid] = get(pid, 0.0) + value
    return bounds


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
        self.citations: int | None = None  # the citations the index records of it (``cited_counts``)
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
            "abstract": self.paper.abstract,
            "score": self.score,
            "cocitation": self.cocitation,
            "coupling": self.coupling,
            "text": self.text,
            "cocited_with": dict(sorted(self.together.items())),
            "shared_references_with": dict(sorted(self.shared.items())),
            "citations": self.citations,
            "why": self.why(),
        }


def papers_among(snap: Snapshot, ids: set[str], known: set[str]) -> tuple[int, bool]:
    """How many of ``ids`` are papers of the index, and whether that is exact: those in ``known`` are; of the
    rest, each is looked up while they number at most ``MATCHED_EXACT_MAX``, else an even sample of about
    ``MATCHED_SAMPLE`` (every k-th by id: ids of a period of the literature share a prefix) and its share is
    scaled up to them all, rounded."""
    certain = len(known & ids)
    unknown = sorted(ids - known)  # in index order: each lookup lands near the last
    if not unknown:
        return certain, True
    sample = unknown if len(unknown) <= MATCHED_EXACT_MAX else unknown[:: -(-len(unknown) // MATCHED_SAMPLE)]
    found = snap.rows("similar: candidates not scored", MATCHED_SQL, {"paper_ids": json.dumps(sample)})[0][0]
    if len(sample) == len(unknown):
        return certain + found, True
    return certain + round(found * len(unknown) / len(sample)), False


def select(
    snap: Snapshot, graph, bounds: dict[str, float], text_part: dict[str, float], need: int, score, ranked: list
) -> tuple[int, bool]:
    """Best bound first: ``score`` twice the page (``need``), then every candidate whose bound reaches the page's
    last score (a hub's thousands are never sorted); how many of those not scored are papers, and whether that
    is exact (``papers_among``; the kept ``graph``, where there is one, knows every paper's id)."""
    pool, taken = list(bounds), set()
    batch = heapq.nlargest(2 * need, pool, key=bounds.__getitem__)
    rest = bounds[batch[-1]] if batch else -math.inf  # no candidate not taken has a larger bound
    while batch:
        score(batch)
        taken.update(batch)
        if len(ranked) < need:  # ids outside the corpus are no results: the next best, at least twice as many
            left = [pid for pid in pool if pid not in taken]
            batch = heapq.nlargest(max(2 * (need - len(ranked)), 2 * len(batch)), left, key=bounds.__getitem__)
            rest = bounds[batch[-1]] if batch else -math.inf
        else:  # the page's last score only rises as more are scored: what falls short of it now always will
            floor = heapq.nlargest(need, (e.score for e in ranked))[-1] - TIE_SLACK
            if floor > rest or len(taken) == len(pool):  # a hub's thousands are not read again for nothing
                break
            batch = [pid for pid, bound in bounds.items() if bound >= floor and pid not in taken]
            rest = math.nextafter(floor, -math.inf)  # every bound left is below the floor
    if len(taken) == len(pool):
        return 0, True
    if graph is not None:
        return len(graph.papers.intersection(bounds.keys() - taken)), True
    return papers_among(snap, bounds.keys() - taken, text_part.keys() & bounds.keys())


def _at(signal: dict, nodes) -> list[dict[str, int]]:
    """For each of ``nodes`` (an array; -1 for none), per seed, its count in the seed's ``(nodes, counts)``
    (nodes ascending), where it is there."""
    out: list[dict[str, int]] = [{} for _ in range(len(nodes))]
    for seed, (seed_nodes, counts) in signal.items():
        for i, j in _positions(seed_nodes, nodes):
            out[i][seed] = int(counts[j])
    return out


def _positions(nodes, wanted) -> list[tuple[int, int]]:
    """``(i, j)`` for each ``wanted[i]`` found at ``nodes[j]`` (``nodes`` ascending; -1 is never there)."""
    import numpy as np

    at = nodes.searchsorted(wanted)
    inside = at < len(nodes)
    found = np.flatnonzero(inside)[nodes[at[inside]] == wanted[inside]]
    return list(zip(found.tolist(), at[found].tolist(), strict=True))


def kept_bounds(
    graph, together: dict, shared: dict, text: dict[str, float], n_seeds: int,
    citing: dict[str, int], read: dict[str, int], degrees: dict[str, tuple[int, int]], skip: set[str],
):  # fmt: skip
    """``upper_bounds`` over the kept graph's arrays (``together`` and ``shared``: per seed, its candidates'
    nodes, ascending, and their counts), the seeds and ``skip`` left out: the candidates' ids and bounds, best
    bound first."""
    import numpy as np

    up = 1.0 + BOUND_SLACK
    lists = [nodes for nodes, _ in (*together.values(), *shared.values())]
    nodes = np.unique(np.concatenate(lists)) if lists else np.zeros(0, dtype=np.int64)
    bounds = np.zeros(len(nodes))
    for signals, weight, degree in ((together, W_COCITATION, 0), (shared, W_COUPLING, 1)):
        for seed, (seed_nodes, counts) in signals.items():
            per = weight * up / n_seeds / math.sqrt(max(1, degrees[seed][degree]))
            if signals is together:
                counts = np.minimum(counts * (citing[seed] / read[seed]), citing[seed])
            bounds[nodes.searchsorted(seed_nodes)] += per * np.sqrt(counts)  # a seed's nodes are distinct
    texts = list(text)
    parts = W_TEXT * up * np.fromiter(text.values(), dtype=float, count=len(texts))
    alone = np.ones(len(texts), dtype=bool)  # papers found by their text alone
    for i, j in _positions(nodes, _nodes(graph, texts)):
        bounds[j] += parts[i]
        alone[i] = False
    for _, j in _positions(nodes, _nodes(graph, list(skip))):
        bounds[j] = -math.inf
    ids = np.concatenate([graph.ids[nodes], np.array(texts, dtype=object)[alone]])
    bounds = np.concatenate([bounds, parts[alone]])
    order = np.argsort(-bounds, kind="stable")[: int(np.count_nonzero(bounds > -math.inf))]
    return ids[order], bounds[order]


def _nodes(graph, ids: list[str]):
    """The nodes of ``ids`` (-1 for an id no citation names), as an array."""
    import numpy as np

    node = graph.node
    return np.fromiter((node.get(pid, -1) for pid in ids), dtype=np.int64, count=len(ids))


def select_kept(graph, ordered, need: int, score, ranked: list) -> int:
    """``select`` over ``kept_bounds``'s candidates, best bound first: what it scores is always a prefix of
    them. How many of the rest are papers (exact)."""
    import numpy as np

    ids, bounds = ordered
    done, last = 0, 0
    while done < len(ids):
        if not done or len(ranked) < need:  # twice the page; then, past ids outside the corpus, twice as many
            end = min(len(ids), done + max(2 * (need - len(ranked)), 2 * last))
        else:  # every candidate whose bound reaches the page's last score
            floor = heapq.nlargest(need, (e.score for e in ranked))[-1] - TIE_SLACK
            end = int(np.searchsorted(-bounds, -floor, side="right"))
            if end <= done:
                break
        score(ids[done:end].tolist())
        done, last = end, end - done
    return len(graph.papers.intersection(ids[done:].tolist()))


class SimilarResult:
    """Papers like ``seeds``, best first, from ``offset`` on; ``matched`` papers had any signal at all (an estimate
    when ``matched_exact`` is false: ``papers_among``)."""

    def __init__(
        self, seeds, ranked, matched, wall_time_ms, offset=0, warnings=None, filters=None, matched_exact=True
    ) -> None:
        self.seeds = seeds
        self.ranked = ranked
        self.matched = matched
        self.matched_exact = matched_exact
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
            "matched_exact": self.matched_exact,
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
    found = {pid: (title, abstract, year) for pid, title, abstract, year, _ in rows}
    unknown = [pid for pid in seeds if pid not in found]
    if unknown:
        shown = ", ".join(quoted(pid) for pid in unknown[:5]) + (
            f" and {len(unknown) - 5:,} more" if len(unknown) > 5 else ""
        )
        raise PaperNotFoundError(f"no paper {shown} in the index: give ids as `retrieval search` shows them")
    params = {"seeds": json.dumps(seeds)}
    degrees = {
        pid: (ins, outs)
        for pid, ins, outs in snap.rows("similar: degrees", DEGREES_SQL, {"paper_ids": json.dumps(sorted(seeds))})
    }
    checked_counts(snap, {pid: ins for pid, (ins, _) in degrees.items()})
    graph = GRAPHS.of(snap)
    if graph is None:  # the statements, while the process does not keep the graph (``adjacency``)
        citers = listed(snap, "similar: citing papers", CITERS_SQL, params)
        sampled = {seed: sampled_citers(ids, fanout) for seed, ids in citers.items()}
        together = counted(snap, "similar: co-cited papers", COCITED_SQL, {"sampled": json.dumps(sampled)})
        shared = counted(snap, "similar: papers sharing references", COUPLED_SQL, params)
        read_rows = sum(map(len, citers.values())) + sum(c.total() for c in (*together.values(), *shared.values()))
        GRAPHS.paid(snap, read_rows)
    else:  # the same lists, counted from the kept arrays: per seed, its candidates' nodes and counts
        citers = {seed: ids for seed in seeds if (ids := graph.citing(seed))}
        sampled = {seed: sampled_citers(ids, fanout) for seed, ids in citers.items()}
        together = {seed: c for seed, ids in sampled.items() if len((c := graph.cocited(seed, ids))[0])}
        shared = {seed: c for seed in seeds if len((c := graph.coupled(seed))[0])}
    citing = {seed: len(ids) for seed, ids in citers.items()}
    read = {seed: len(ids) for seed, ids in sampled.items()}
    estimated = frozenset(seed for seed in together if read[seed] < citing[seed])
    text = " ".join(f"{found[s][0]} {found[s][1]}" for s in seeds)[:MAX_QUERY_CHARS]
    wq = lexical.weigh(snap, seeds_query(text, snap.stats.analyser))
    skip = set(seeds) | set(exclude)
    allowed = passing(snap, filters) if filters else None
    if allowed is None:
        hits, _ = lexical.top_papers(snap, wq, TEXT_DEPTH + len(skip))
    else:  # the text's best among the papers that pass, never the survivors of an unfiltered top k
        hits, _ = lexical.filtered_top_papers(snap, wq, TEXT_DEPTH + len(skip), allowed)
    text_scores = dict(itertools.islice(((pid, score) for pid, score in hits if pid not in skip), TEXT_DEPTH))
    best = max(text_scores.values(), default=0.0)
    text_part = {pid: score / best if best > 0 else 0.0 for pid, score in text_scores.items()}
    ranked: list[SimilarPaper] = []
    kept = graph is not None and not filters and sort in (None, "relevance")  # bounds and selection in arrays
    if graph is not None and not kept:  # by id, as the statements give them
        together = {seed: graph.as_ids(c) for seed, c in together.items()}
        shared = {seed: graph.as_ids(c) for seed, c in shared.items()}

    def counts_of(ids: list[str]) -> list[tuple[dict[str, int], dict[str, int]]]:
        """For each of ``ids``, per seed: how many of its citing papers read cite it too, how many references
        they share."""
        if not kept:
            return [
                (
                    {s: counts[pid] for s, counts in together.items() if pid in counts},
                    {s: counts[pid] for s, counts in shared.items() if pid in counts},
                )
                for pid in ids
            ]
        nodes = _nodes(graph, ids)  # a paper found by its text alone may cite and be cited by nothing
        return list(zip(_at(together, nodes), _at(shared, nodes), strict=True))

    def score(ids: list[str]) -> None:
        """Score ``ids`` in full: those that are papers of the index, with their titles and degrees."""
        papers = {
            pid: Paper(pid, title, year=year, source="merged")
            for pid, title, year in snap.rows("similar: the candidates", CANDIDATES_SQL, {"paper_ids": json.dumps(ids)})
        }  # co-cited or shared ids outside the corpus are not results
        rows = snap.rows("similar: degrees", DEGREES_SQL, {"paper_ids": json.dumps(sorted(papers))})
        checked_counts(snap, {pid: ins for pid, ins, _ in rows})
        for (pid, ins, outs), (together_n, common) in zip(rows, counts_of([pid for pid, _, _ in rows]), strict=True):
            cocited = {s: cocitation_estimate(n, citing[s], read[s], ins) for s, n in together_n.items()}
            cocitation = sum(n / math.sqrt(max(1, degrees[s][0]) * max(1, ins)) for s, n in cocited.items())
            coupling = sum(n / math.sqrt(max(1, degrees[s][1]) * max(1, outs)) for s, n in common.items())
            entry = SimilarPaper(
                papers[pid], cocitation / len(seeds), coupling / len(seeds), text_part.get(pid, 0.0),
                {s: round(n) for s, n in cocited.items()}, common,
            )  # fmt: skip
            entry.citations = ins
            if estimated:
                entry.estimated = estimated & cocited.keys()
            ranked.append(entry)

    matched, exact = 0, True
    if kept:  # best bound first, the candidates in arrays (``kept_bounds``): the count is exact
        ordered = kept_bounds(graph, together, shared, text_part, len(seeds), citing, read, degrees, skip)
        matched = select_kept(graph, ordered, offset + limit, score, ranked)
    else:
        bounds = upper_bounds(together, shared, text_part, len(seeds), citing, read, degrees)
        for pid in skip:
            bounds.pop(pid, None)
        if allowed is not None and bounds:
            for pid in failing(snap, list(bounds), allowed):
                bounds.pop(pid, None)
        pool = list(bounds)
        if sort not in (None, "relevance"):  # ordered by citations or year: every candidate is scored
            score(pool)
        else:
            matched, exact = select(snap, graph, bounds, text_part, offset + limit, score, ranked)
    ranked.sort(key=lambda e: (-round(e.score, SCORE_DECIMALS), e.paper.id))  # last-bit sums tie on id
    ranked = reorder(ranked, sort, {e.paper.id: e.citations for e in ranked})
    warnings = []
    if not together and not shared:
        linked = any(any(degrees.get(seed, (0, 0))) for seed in seeds)
        warnings.append(
            "no paper is cited beside the seeds or shares a reference with them: ranked by text similarity only"
            if linked
            else "the seeds have no citations in the index: ranked by text similarity only"
        )
    page = ranked[offset : offset + limit]
    wall = (time.perf_counter() - start) * 1000.0
    result = SimilarResult(seeds, page, len(ranked) + matched, wall, offset, warnings, filters, exact)
    result.cocitation_read = {seed: {"citing": citing[seed], "read": read[seed]} for seed in sorted(estimated)}
    return result
