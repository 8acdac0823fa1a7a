"""The lexical pass: Okapi BM25 computed in SQL over ``term_freq``, ``doc_freq`` and ``doc_len``, exactly, with
MaxScore-style pruning so that a query scores only the papers that can still reach its top k.

The variant is defined in ``retrieval.bm25`` (Lucene's idf, k1 = 1.5, b = 0.75, read from the index; a token
repeated in the query counts each time). N and avgdl are read in the same transaction as the postings.

How a top-k query runs (all statements in one read transaction):

1. ``TERMS_SQL`` looks up the query's terms: id, df, largest stored impact. A posting of term t contributes at
   most ``weight(t) * impact / 1000 * drift``, with ``weight = qtf * idf`` and ``drift = max(1, avgdl /
   impact_avgdl)``, which keeps stored impacts bounds after adds (see ``retrieval.bm25.drift``).
2. ``THRESHOLD_SQL`` scores exactly the best-impact papers of the rarest terms (read whole when rare, from their
   head otherwise); the k-th best of those scores, ``theta``, is a lower bound of the final k-th score. A plan
   that would still read many postings first draws a second, larger sample from the heads of the terms it
   would read (each sample's k-th score is a lower bound, so the larger one is kept).
3. ``choose_min_impacts`` decides, per term, the smallest impact read: 0 (the whole list), ``HEAD_IMPACT``
   (its head, through the partial index ``ix_term_freq_head``) or ``NEVER`` (looked up only), greedily by
   bound removed per posting read, until a paper none of whose read postings was found provably scores
   below theta.
4. ``TOP_K_SQL`` groups the read postings by paper, keeps the papers whose partial score plus the unread
   terms' bounds can reach theta, adds the unread terms' exact contributions by primary-key lookups, and
   returns the best k, ties by paper id. Queries with more than ``MAX_PRUNED_TERMS`` distinct terms, or whose
   plan is expected to cost more than reading everything, run ``EXHAUSTIVE_SQL`` instead.

The top k is ranked on scores rounded to ``SCORE_DECIMALS`` (10) places, ties by paper id: two papers whose sums
differ only by the order of their terms' additions (an ulp) tie, as they do mathematically.
Every paper left out provably scores below ``theta`` (bounds carry a relative slack of 1e-9, and theta an absolute
1e-9, far wider than that rounding),
so the result equals ``EXHAUSTIVE_SQL``, the plain aggregation over every posting of every query term, which
``exhaustive=True`` runs and the tests compare against. The statements are returned by ``statements()`` and run
by ``search()``, so ``retrieval search --sql`` shows exactly what runs.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass

from ..bm25 import BOUND_SLACK, HEAD_IMPACT, IMPACT_SCALE, SCORE_DECIMALS, TIE_SLACK, drift, idf
from ..store.database import read_snapshot, read_stats
from ..text import tokenise

_WEIGHTED_TERMS = """\
WITH query_terms AS (
    SELECT value AS term,
           count(*) AS qtf
    FROM json_each(:query_terms)
    GROUP BY value
),
weighted_terms AS (
    SELECT d.term_id,
           q.qtf * ln(1.0 + (:n_papers - d.df + 0.5) / (d.df + 0.5)) AS weight
    FROM query_terms AS q
    JOIN doc_freq AS d ON d.term = q.term
)"""

_TF_NORM = "tf.count * (:k1 + 1.0) / (tf.count + :k1 * (1.0 - :b + :b * tf.length / :avgdl))"

TERMS_SQL = """\
SELECT d.term,
       d.term_id,
       d.df,
       d.max_impact
FROM doc_freq AS d
WHERE d.term IN (SELECT value FROM json_each(:query_terms))"""

#: How many of the rarest query terms give the papers that set the first threshold.
SEED_TERMS = 4


def _seed_slot(slot: int) -> str:
    # Either branch is empty when its parameter is -1: a rare term is read whole, a common one from its head.
    return f"""\
    SELECT doc_id FROM (
        SELECT doc_id
        FROM term_freq
        WHERE term_id = :scan_{slot}
        ORDER BY impact DESC, doc_id
        LIMIT :seed_pool
    )
    UNION
    SELECT doc_id FROM (
        SELECT doc_id
        FROM term_freq INDEXED BY ix_term_freq_head
        WHERE term_id = :head_{slot}
          AND impact >= {HEAD_IMPACT}
        ORDER BY impact DESC
        LIMIT :seed_pool
    )"""


_SEEDS = "\n    UNION\n".join(_seed_slot(slot) for slot in range(1, SEED_TERMS + 1))

THRESHOLD_SQL = f"""\
{_WEIGHTED_TERMS},
seeds AS (
{_SEEDS}
),
seed_scores AS (
    SELECT s.doc_id,
           (
               SELECT sum(w.weight * (
                   SELECT {_TF_NORM}
                   FROM term_freq AS tf
                   WHERE tf.term_id = w.term_id
                     AND tf.doc_id = s.doc_id
               ))
               FROM weighted_terms AS w
           ) AS score
    FROM seeds AS s
)
SELECT score
FROM seed_scores
ORDER BY score DESC
LIMIT 1 OFFSET :k - 1"""

TOP_K_SQL = f"""\
{_WEIGHTED_TERMS},
plan AS (
    SELECT w.term_id,
           w.weight,
           j.value ->> 1 AS min_impact
    FROM json_each(:plan) AS j
    JOIN weighted_terms AS w ON w.term_id = j.value ->> 0
),
seen AS (
    SELECT tf.doc_id,
           p.weight * {_TF_NORM} AS part
    FROM plan AS p
    CROSS JOIN term_freq AS tf ON tf.term_id = p.term_id AND tf.impact >= p.min_impact
    WHERE p.min_impact < {HEAD_IMPACT}
    UNION ALL
    SELECT tf.doc_id,
           p.weight * {_TF_NORM} AS part
    FROM plan AS p
    CROSS JOIN term_freq AS tf INDEXED BY ix_term_freq_head
        ON tf.term_id = p.term_id AND tf.impact >= {HEAD_IMPACT} AND tf.impact >= p.min_impact
    WHERE p.min_impact >= {HEAD_IMPACT}
),
candidates AS (
    SELECT doc_id,
           sum(part) AS partial
    FROM seen
    GROUP BY doc_id
    HAVING partial >= :min_partial
)
SELECT dl.paper_id,
       c.partial + coalesce((
           SELECT sum(p.weight * (
               SELECT {_TF_NORM}
               FROM term_freq AS tf
               WHERE tf.term_id = p.term_id
                 AND tf.doc_id = c.doc_id
                 AND tf.impact < p.min_impact
           ))
           FROM plan AS p
           WHERE p.min_impact > 0
       ), 0.0) AS score
FROM candidates AS c
CROSS JOIN doc_len AS dl ON dl.doc_id = c.doc_id
ORDER BY round(score, {SCORE_DECIMALS}) DESC, dl.paper_id
LIMIT :k"""

EXHAUSTIVE_SQL = f"""\
{_WEIGHTED_TERMS},
scores AS (
    SELECT tf.doc_id,
           sum(w.weight * {_TF_NORM}) AS score
    FROM weighted_terms AS w
    CROSS JOIN term_freq AS tf ON tf.term_id = w.term_id
    GROUP BY tf.doc_id
)
SELECT dl.paper_id,
       s.score
FROM scores AS s
CROSS JOIN doc_len AS dl ON dl.doc_id = s.doc_id
ORDER BY round(s.score, {SCORE_DECIMALS}) DESC, dl.paper_id
LIMIT :k"""

SCORES_FOR_SQL = f"""\
{_WEIGHTED_TERMS}
SELECT dl.paper_id,
       (
           SELECT sum(w.weight * (
               SELECT {_TF_NORM}
               FROM term_freq AS tf
               WHERE tf.term_id = w.term_id
                 AND tf.doc_id = dl.doc_id
           ))
           FROM weighted_terms AS w
       ) AS score
FROM json_each(:paper_ids) AS j
JOIN doc_len AS dl ON dl.paper_id = j.value
WHERE score IS NOT NULL
ORDER BY dl.paper_id"""

#: Best-impact papers of each seed term scored to set the first threshold (at least k).
SEED_POOL = 16
#: A seed term with at most this many postings is read whole for its best impacts; a commoner one from its head.
SCAN_SEED_MAX_DF = 4096
#: The share of a term's postings assumed to be in its head, to weigh reading the head against the whole list.
HEAD_SHARE = 0.2
#: ``min_impact`` of a term whose postings are only looked up, never read (above any impact).
NEVER = 1 << 30
#: Queries with more distinct indexed terms than this run the plain aggregation without planning.
MAX_PRUNED_TERMS = 24
#: A plan expected to read more postings than this draws a second, larger threshold sample first.
REFINE_ABOVE = 20_000
#: Best-impact papers per term in that second sample.
REFINE_POOL = 256
#: A primary-key lookup of one unread term for one kept paper, in units of one posting read and grouped.
LOOKUP_COST = 0.5


@dataclass(frozen=True)
class QueryTerm:
    """A query term as the pruning sees it: its weight (qtf * idf) and how much one posting can contribute."""

    term_id: int
    df: int
    weight: float
    max_impact: int
    factor: float  # drift * (1 + slack) / IMPACT_SCALE: a posting contributes at most weight * impact * factor

    def below(self, min_impact: int) -> float:
        """The most a posting with impact below ``min_impact`` can contribute (0 when none is below)."""
        return self.weight * self.factor * max(0, min(min_impact - 1, self.max_impact))

    def cost(self, min_impact: int) -> float:
        """A rough count of the postings read when reading those with impact >= ``min_impact``."""
        if min_impact > self.max_impact:
            return 0.0
        return self.df * HEAD_SHARE if min_impact >= HEAD_IMPACT else float(self.df)


@dataclass(frozen=True)
class Plan:
    """What a pruned top-k query decided: the threshold theta and, per term, the smallest impact read (0: the
    whole list; ``HEAD_IMPACT`` or more: its head, through the partial index; ``NEVER``: looked up only)."""

    theta: float
    min_impacts: dict[int, int]
    min_partial: float
    pruned: bool = True  # False: the plain aggregation is expected to be cheaper, and runs instead
    thresholded: bool = True  # False: too many terms to plan, THRESHOLD_SQL did not run
    second_sample: dict | None = None  # the seeds of a second THRESHOLD_SQL, when the plan drew one

    @property
    def sql(self) -> str:
        return TOP_K_SQL if self.pruned else EXHAUSTIVE_SQL

    def to_dict(self) -> dict:
        return {
            "theta": self.theta,
            "min_impacts": self.min_impacts,
            "min_partial": self.min_partial,
            "pruned": self.pruned,
        }


def choose_min_impacts(terms: list[QueryTerm], theta: float) -> dict[int, int]:
    """Per term, the smallest impact to read, so that a paper none of whose read postings is found scores below
    ``theta``: the sum over terms of ``below(min_impact)`` must stay under theta.

    Greedy, from reading nothing: each step takes the cheapest reduction of that sum per posting read (a
    term's head, or its whole list), until the sum is below theta; with theta = 0 every list is read whole.
    """
    chosen = {t.term_id: NEVER for t in terms}
    if theta <= 0:
        return dict.fromkeys(chosen, 0)
    total = sum(t.below(NEVER) for t in terms)
    while total >= theta:
        best = None
        for t in terms:
            now = chosen[t.term_id]
            for option in (HEAD_IMPACT, 0):
                if option >= now:
                    continue
                gain = t.below(now) - t.below(option)
                if gain <= 0:
                    continue
                price = max(1.0, t.cost(option) - t.cost(now))
                key = (gain / price, -t.term_id, -option)
                if best is None or key > best[0]:
                    best = (key, t, option, gain)
        if best is None:
            break
        _, t, option, gain = best
        chosen[t.term_id] = option
        total -= gain
    return chosen


class BM25Index:
    """Okapi BM25 (k1=1.5, b=0.75, idf = ln(1 + (N - df + 0.5)/(df + 0.5))) over an index file: the exact top k,
    pruned by the stored impacts (see the module's docstring)."""

    def __init__(self, conn: sqlite3.Connection, seed_pool: int = SEED_POOL) -> None:
        self._conn = conn
        self.seed_pool = seed_pool
        self.refined = 0  # how many plans a second threshold sample changed (for benchmarks)

    def _params(self, terms: list[str]) -> dict:
        stats = read_stats(self._conn)
        return {
            "query_terms": json.dumps(terms),
            "n_papers": stats.n_papers,
            "avgdl": stats.avgdl,
            "k1": stats.k1,
            "b": stats.b,
            "impact_avgdl": float(stats.info.get("impact_avgdl") or stats.avgdl),
        }

    def _terms(self, params: dict, terms: list[str]) -> list[QueryTerm]:
        qtf = Counter(terms)
        factor = drift(params["avgdl"], params["impact_avgdl"]) * (1.0 + BOUND_SLACK) / IMPACT_SCALE
        return [
            QueryTerm(term_id, df, qtf[term] * idf(params["n_papers"], df), max_impact, factor)
            for term, term_id, df, max_impact in self._conn.execute(TERMS_SQL, {"query_terms": params["query_terms"]})
        ]

    def _threshold(self, params: dict, seeds: dict) -> float:
        """The k-th best exact score among the seed papers (0 when there are fewer than k), less the slack."""
        row = self._conn.execute(THRESHOLD_SQL, {**params, **seeds}).fetchone()
        return max(0.0, row[0] * (1.0 - BOUND_SLACK) - TIE_SLACK) if row and row[0] is not None else 0.0

    def _seeds(self, qterms: list[QueryTerm], top_k: int, pool: int | None = None, by_cost: bool = False) -> dict:
        """Parameters of ``THRESHOLD_SQL``: the first ``SEED_TERMS`` terms (the rarest, or as given when
        ``by_cost``), each read whole or from its head (-1: unused), and the pool per term."""
        rarest = (qterms if by_cost else sorted(qterms, key=lambda t: (t.df, t.term_id)))[:SEED_TERMS]
        slots = {}
        for i in range(1, SEED_TERMS + 1):
            t = rarest[i - 1] if i <= len(rarest) else None
            whole = t is not None and t.df <= SCAN_SEED_MAX_DF
            slots[f"scan_{i}"] = t.term_id if whole else -1
            slots[f"head_{i}"] = t.term_id if t is not None and not whole else -1
        return {**slots, "seed_pool": max(pool or self.seed_pool, top_k)}

    def plan(self, query: str, top_k: int) -> tuple[dict, Plan | None]:
        """The parameters of ``TOP_K_SQL`` for ``query``'s top ``top_k`` and the plan behind them (runs
        ``TERMS_SQL`` and ``THRESHOLD_SQL``; the plan is None when no query term is in the index)."""
        terms = tokenise(query)
        params = {**self._params(terms), "k": top_k}
        qterms = self._terms(params, terms)
        if not qterms or top_k <= 0:
            return params, None
        if len(qterms) > MAX_PRUNED_TERMS:  # a whole abstract as the query: nearly every list is read anyway
            return params, Plan(0.0, dict.fromkeys((t.term_id for t in qterms), 0), float("-inf"), False, False)
        theta = self._threshold(params, self._seeds(qterms, top_k))
        min_impacts = choose_min_impacts(qterms, theta)
        second_sample = None
        if sum(t.cost(min_impacts[t.term_id]) for t in qterms) > REFINE_ABOVE:
            # An expensive plan: a second, larger sample from the heads of the terms it would read raises theta
            # (each sample's k-th score is a lower bound of the true one), and often the plan becomes cheap.
            costly = sorted(qterms, key=lambda t: (-t.cost(min_impacts[t.term_id]), t.term_id))
            second_sample = self._seeds(costly, top_k, REFINE_POOL, by_cost=True)
            second = self._threshold(params, second_sample)
            if second > theta:
                theta = second
                min_impacts = choose_min_impacts(qterms, theta)
                self.refined += 1
        unread = sum(t.below(min_impacts[t.term_id]) for t in qterms)
        # Rough costs in postings handled: the pruned statement reads some lists and looks the other terms up
        # for each paper it keeps; the plain aggregation reads every list once.
        read = sum(t.cost(min_impacts[t.term_id]) for t in qterms)
        looked_up = sum(1 for t in qterms if min_impacts[t.term_id] > 0)
        pruned = read * (1.0 + LOOKUP_COST * looked_up) < sum(t.df for t in qterms)
        plan = Plan(theta, min_impacts, theta - unread if theta > 0 else float("-inf"), pruned, True, second_sample)
        params["plan"] = json.dumps(sorted(min_impacts.items()))
        params["min_partial"] = plan.min_partial
        return params, plan

    def statements(self, query: str, top_k: int = 10) -> list[tuple[str, str, dict]]:
        """``(name, statement, parameters)`` of each statement a top-k search runs, in order."""
        params, plan = self.plan(query, top_k)
        if plan is None:
            return [("lexical: terms", TERMS_SQL, {"query_terms": params["query_terms"]})]
        statements = [("lexical: terms", TERMS_SQL, {"query_terms": params["query_terms"]})]
        if plan.thresholded:
            seeds = self._seeds(self._terms(params, tokenise(query)), top_k)
            statements.append(("lexical: threshold", THRESHOLD_SQL, {**params, **seeds}))
        if plan.second_sample:
            statements.append(("lexical: threshold, second sample", THRESHOLD_SQL, {**params, **plan.second_sample}))
        name = "lexical: top-k" if plan.pruned else "lexical: top-k (plain aggregation)"
        return [*statements, (name, plan.sql, params)]

    def search_sql(self, query: str, top_k: int = 10) -> tuple[str, dict]:
        """The ranking statement and its parameters for ``query`` (after the planning statements ran)."""
        with read_snapshot(self._conn):
            params, plan = self.plan(query, top_k)
        return (plan.sql if plan else TOP_K_SQL), params

    def search(self, query: str, top_k: int = 10, exhaustive: bool = False) -> list[tuple[str, float]]:
        """The top ``top_k`` ``(paper id, score)`` pairs, best first, ties by id; empty for a query with no token.

        ``exhaustive`` scores every posting of the query's terms instead of pruning (same result, slower)."""
        terms = tokenise(query)
        if not terms or top_k <= 0:
            return []
        with read_snapshot(self._conn) as conn:
            if exhaustive:
                return [(r[0], r[1]) for r in conn.execute(EXHAUSTIVE_SQL, {**self._params(terms), "k": top_k})]
            params, plan = self.plan(query, top_k)
            if plan is None:
                return []
            return [(row[0], row[1]) for row in conn.execute(plan.sql, params)]

    def scores_sql(self, query: str, paper_ids: list[str]) -> tuple[str, dict]:
        """The statement and parameters that score the given papers (those sharing no term are absent)."""
        return SCORES_FOR_SQL, {**self._params(tokenise(query)), "paper_ids": json.dumps(paper_ids)}

    def scores(self, query: str, paper_ids: list[str]) -> dict[str, float]:
        """BM25 score of each paper in ``paper_ids`` for ``query`` (0.0 for one that shares no term with it)."""
        result = dict.fromkeys(paper_ids, 0.0)
        if not paper_ids or not tokenise(query):
            return result
        with read_snapshot(self._conn) as conn:
            sql, params = self.scores_sql(query, paper_ids)
            result.update((row[0], row[1]) for row in conn.execute(sql, params))
        return result
