"""The lexical pass: Okapi BM25, exactly, over ``term_freq``, ``doc_freq`` and ``doc_len`` in SQL, or over the
postings BLOBs in NumPy (``retrieval.search.blobs``), the path chosen per query by a cost model.

The variant is defined in ``retrieval.bm25`` (Lucene's idf, k1 = 1.5, b = 0.75, read from the index; a token
repeated in the query counts each time). Each query term's weight ``qtf * idf`` is computed once, in Python, by
``retrieval.bm25.idf``, and reaches every statement as the JSON parameter ``:weights`` (or inside ``:plan``); the
term-frequency factor is ``retrieval.bm25.TF_NORM_SQL``. N and avgdl come from the snapshot the postings are
read in.

How a top-k query runs (all statements in one read snapshot):

1. ``TERMS_SQL`` looks up the query's terms (``weigh``): id, df, and the largest tf_norm their postings chunks
   allow (``retrieval.bm25.CHUNK_BOUND_SQL``): a posting of term t contributes at most ``weight(t)`` times it,
   exactly so at any average length, adds and removes included.
2. ``blob_path``, the cost model (``retrieval.search.costs``), weighs the query: many terms, or only common
   ones, are costed before any plan (SQL pays about a microsecond for each posting row it reads and groups,
   NumPy a few hundredths, plus its fixed costs and, in a process that has not paid it, its import; on a
   PostgreSQL server SQL's costs count three times, ``costs.SQL_FACTOR``) and go to the BLOBs
   (``retrieval.search.blobs``, one statement for every list not kept from an earlier query) when cheaper
   there; so does a query the BLOBs answer in less than SQL's two statements. A query of a few terms, one of
   them rare, is planned first (step 3 and 4, without a second sample) and then costed by what its plan
   would read (``blobs_after_plan``): pruning varies most there, from a few lookups to whole common lists.
3. ``THRESHOLD_SQL`` scores exactly a sample: the best papers of the ``SAMPLE_TERMS`` terms of largest
   bound (those with at most ``SCAN_SAMPLE_MAX_DF`` postings, read whole), ranked by what those terms give them,
   the best ``SCORED`` of them scored over every query term; the k-th best of those scores, the *threshold*, is
   a lower bound of the final k-th score. A plan that would still read many postings first draws a second,
   larger sample from the terms it would read (each sample's k-th score is a lower bound, so the larger one is
   kept).
4. ``choose_reads`` decides, per term, whether its list is read or only looked up,
   greedily by bound removed per posting read, until a paper none of whose read postings was found provably
   scores below the threshold: MaxScore's split into essential terms (read) and non-essential ones (looked up).
5. ``TOP_K_SQL`` groups the read postings by paper, keeps the papers whose partial score plus the unread
   terms' bounds can reach the threshold, then adds the unread terms' exact contributions by primary-key
   lookups in ``LOOKUP_STAGES`` stages (``stages``: the terms of largest unread bound first), dropping after each
   stage the papers that can no longer reach the threshold, and returns the best k, ties by paper id. When the
   plan is expected to cost more than reading everything (``estimated_cost``), ``EXHAUSTIVE_SQL`` runs instead.

The top k is ranked on scores rounded to ``SCORE_DECIMALS`` (10) places, ties by paper id: two papers whose sums
differ only by the order of their terms' additions (an ulp) tie, as they do mathematically. Every paper left
out provably scores below the threshold (bounds carry a relative slack of 1e-9, and the threshold an absolute
1e-9, far wider than that rounding), so the result equals ``EXHAUSTIVE_SQL``, the plain aggregation over every
posting of every query term, which ``exhaustive=True`` runs and the tests compare against. Every statement runs
through the snapshot's executor, so ``retrieval search --sql`` prints what ran.

The rows a query reads anyway are checked, so that a hand-edited index is refused (``NotAnIndexError``, naming the
table and row, ``retrieval check`` and ``retrieval build``) rather than ranked wrongly: each term's df against the
postings its chunks hold (``TERMS_SQL``, from the same rows); each posting a statement scores, its count a whole
number from 1 to its paper's length and the paper in ``doc_len`` (else its part is ``DAMAGED_PART``, which puts
the paper first); and every score against the sum of the query terms' bounds (``checked``), which a posting the
chunks' bounds understate exceeds. What no query reads (a plausible count or length changed by hand, a posting
deleted) is ``retrieval check``'s (``retrieval.store.integrity``).
"""

from __future__ import annotations

import json
import math
import sys
from collections import namedtuple
from collections.abc import Iterable

from ..bm25 import BOUND_SLACK, SCORE_DECIMALS, TIE_SLACK, idf, tf_norm_sql
from ..errors import NotAnIndexError
from ..store.database import IndexStats, build_command, shown
from ..store.sql.dialect import DIALECTS, POSTGRESQL, Dialect, register_sharded, statement
from ..store.sql.executor import Executor, Snapshot
from ..text import Analyser
from ..validate import check_int, paper_id_list, quoted
from . import costs
from .filters import Filters, Passing, every_doc, failing, passing
from .query import Query, QueryTerm, WeightedQuery


def _tf_norm(d: Dialect, count: str = "tf.count", length: str = "dl.length") -> str:
    return tf_norm_sql(count, length, d.double)


#: What a posting whose count or length cannot be gives a paper in place of its part: a count that is not from 1
#: to its paper's length (zero, negative, text: SQLite orders text above every number), a length that is not a
#: number up to the lengths BLOB's widest, or, where a scoring statement joins it so, a paper doc_len lacks. Far
#: above any score a query can reach (a part is at most ``weight * (k1 + 1)``), the paper comes first and
#: ``checked`` refuses the index with its id, rather than ranking it with a part computed from a hand-edited row.
DAMAGED_PART = 1e200
#: Scores at or above this come from a ``DAMAGED_PART``.
_DAMAGED_ABOVE = 1e100


def _checked_part(d: Dialect, part: str, count: str = "tf.count", length: str = "dl.length") -> str:
    """``part`` (a posting's part of a score, or its tf_norm) where the posting's count and length can be, else
    ``DAMAGED_PART``: three comparisons a posting (about 5% of the plain aggregation's time on hepth). SQLite
    orders a text above every number: a text count fails ``length BETWEEN count AND ...``, a text length the upper
    end; a length ``doc_len`` lacks (its join is a LEFT JOIN) is NULL and fails both."""
    return (
        f"CASE WHEN {count} >= 1 AND {length} BETWEEN {count} AND 4294967295 THEN {part} "
        f"ELSE {d.double(repr(DAMAGED_PART))} END"
    )


# A term's bound is the largest tf_norm its postings chunks allow (``tf_norm`` at a chunk's largest count and
# smallest length: exact at any average length); a term with no chunk is a damaged index (``weigh`` says so), as
# is one whose chunks hold another number of postings than its df (read from the same rows: free). The terms
# are looked up by key (``Dialect.any_of``).
TERMS_SQL = statement(
    lambda d: (
        f"""\
SELECT d.term,
       d.term_id,
       d.df,
       max({_tf_norm(d, "p.max_count", "p.min_length")}) AS max_tf,
       sum(p.df) AS chunked
FROM doc_freq AS d
LEFT JOIN postings AS p ON p.term_id = d.term_id
WHERE d.term {d.any_of("terms")}
GROUP BY d.term_id, d.term, d.df
ORDER BY d.term_id"""
    )
)
# A sharded coordinator plans its joins hashed (``Executor.begin_shards``), which read the whole of ``postings`` (a
# table of its own) for a few terms: each term's chunks looked up by a lateral subquery, the same rows and values.
register_sharded(
    TERMS_SQL,
    f"""\
SELECT d.term,
       d.term_id,
       d.df,
       p.max_tf,
       p.chunked
FROM doc_freq AS d
LEFT JOIN LATERAL (
    SELECT max({_tf_norm(DIALECTS[POSTGRESQL], "p.max_count", "p.min_length")}) AS max_tf,
           sum(p.df) AS chunked
    FROM postings AS p
    WHERE p.term_id = d.term_id
) AS p ON true
WHERE d.term {DIALECTS[POSTGRESQL].any_of("terms")}
ORDER BY d.term_id""",
)


def _weighted_terms(d: Dialect) -> str:
    # MATERIALIZED: the weights are read out of the JSON once, into a table, not once per posting joined to them
    # (which doubled the plain aggregation's time on whole-abstract queries).
    return f"""\
WITH weighted_terms AS MATERIALIZED (
    SELECT {d.field(0, "integer")} AS term_id,
           {d.field(1, "double precision")} AS weight
    FROM {d.items("weights")}
)"""


#: How many query terms (those of largest bound) give the papers of a threshold sample.
SAMPLE_TERMS = 8


def _sample_slot(d: Dialect, slot: int) -> str:
    # Empty when its parameter is -1 (a common term is not sampled: its best papers mean reading its list).
    return f"""\
    SELECT doc_id, {d.double(f":weight_{slot}")} * part AS part FROM (
        SELECT tf.doc_id,
               {_checked_part(d, _tf_norm(d))} AS part
        FROM term_freq AS tf
        LEFT JOIN doc_len AS dl ON dl.doc_id = tf.doc_id
        WHERE tf.term_id = :scan_{slot}
        ORDER BY part DESC, tf.doc_id
        LIMIT :sample_size
    ){d.alias(f"scan_{slot}")}"""


def _threshold(d: Dialect) -> str:
    slots = "\n    UNION ALL\n".join(_sample_slot(d, slot) for slot in range(1, SAMPLE_TERMS + 1))
    return f"""\
{_weighted_terms(d)},
slots AS (
{slots}
),
sample AS MATERIALIZED (
    SELECT doc_id
    FROM slots
    GROUP BY doc_id
    ORDER BY sum(part) DESC, doc_id
    LIMIT :scored
),
sample_scores AS (
    SELECT s.doc_id,
           (
               SELECT sum(w.weight * (
                   SELECT {_checked_part(d, _tf_norm(d))}
                   FROM term_freq AS tf
                   WHERE tf.term_id = w.term_id
                     AND tf.doc_id = s.doc_id
               ))
               FROM weighted_terms AS w
           ) AS score
    FROM sample AS s
    LEFT JOIN doc_len AS dl ON dl.doc_id = s.doc_id
)
SELECT score
FROM sample_scores
ORDER BY score DESC{d.nulls_last}
LIMIT 1 OFFSET :k - 1"""


# The sampled papers are ranked by what the sampled terms give them, and only the best ``:scored`` are scored
# exactly (a lookup per query term each), so a long query's sample stays cheap.
THRESHOLD_SQL = statement(_threshold, scatter="max")
# A sharded index (retrieval.store.postgres.shards) runs the statements that read only the postings on every shard, with
# the corpus-wide weights and avgdl as parameters, and merges their results: each shard's pruned top k is exact
# for the shard, and the corpus's top k is the best k of theirs.

#: Lookup stages of the pruned top k: the terms looked up are split into this many groups, largest bound first,
#: and a paper whose partial score plus the bounds still unread cannot reach the threshold is dropped after each.
LOOKUP_STAGES = 4


def _lookup_stage(d: Dialect, stage: int) -> str:
    # A kept paper carries its doc_len row's length as ``dl.length`` from stage to stage (``dl``: the scoring
    # text's name for it), so a lookup reads one posting and no other row.
    source = "candidates" if stage == 1 else f"stage_{stage - 1}"
    return f"""\
stage_{stage} AS MATERIALIZED (
    SELECT dl.doc_id,
           dl.length,
           dl.partial + coalesce((
               SELECT sum(p.weight * (
                   SELECT {_checked_part(d, _tf_norm(d))}
                   FROM term_freq AS tf
                   WHERE tf.term_id = p.term_id
                     AND tf.doc_id = dl.doc_id
               ))
               FROM lookups_{stage} AS p
           ), {d.double("0.0")}) AS partial
    FROM {source} AS dl
    WHERE dl.partial >= :need_{stage}
)"""


def _plan_terms(d: Dialect, name: str, parameter: str) -> str:
    return f"""\
{name} AS MATERIALIZED (
    SELECT {d.field(0, "integer")} AS term_id,
           {d.field(1, "integer")} AS read,
           {d.field(2, "double precision")} AS weight
    FROM {d.items(parameter)}
)"""


def _top_k(d: Dialect) -> str:
    stages = ",\n".join(
        _plan_terms(d, f"lookups_{i}", f"lookups_{i}") + ",\n" + _lookup_stage(d, i)
        for i in range(1, LOOKUP_STAGES + 1)
    )
    return f"""\
WITH {_plan_terms(d, "plan", "plan")},
seen AS (
    SELECT tf.doc_id,
           dl.length,
           {_checked_part(d, f"p.weight * {_tf_norm(d)}")} AS part
    FROM plan AS p
    {d.cross_join} term_freq AS tf ON tf.term_id = p.term_id
    LEFT JOIN doc_len AS dl ON dl.doc_id = tf.doc_id
    WHERE {d.flag("p.read")}
),
candidates AS MATERIALIZED (
    SELECT doc_id,
           {d.group_value("length")},
           sum(part) AS partial
    FROM seen
    GROUP BY doc_id
    HAVING {d.output("partial", "sum(part)")} >= :min_partial
),
{stages}
SELECT dl.paper_id,
       c.partial AS score
FROM stage_{LOOKUP_STAGES} AS c
{d.paper_of("c.doc_id")}
WHERE c.partial >= :threshold
ORDER BY {d.rounded(d.output("score", "c.partial"), SCORE_DECIMALS)} DESC, dl.paper_id{d.bytes_order}
LIMIT :k"""


TOP_K_SQL = statement(_top_k, scatter="top_k")

EXHAUSTIVE_SQL = statement(
    lambda d: (
        f"""\
{_weighted_terms(d)},
scores AS (
    SELECT tf.doc_id,
           sum({_checked_part(d, f"w.weight * {_tf_norm(d)}")}) AS score
    FROM weighted_terms AS w
    {d.cross_join} term_freq AS tf ON tf.term_id = w.term_id
    LEFT JOIN doc_len AS dl ON dl.doc_id = tf.doc_id
    GROUP BY tf.doc_id
)
SELECT dl.paper_id,
       s.score
FROM scores AS s
{d.paper_of("s.doc_id")}
ORDER BY {d.rounded("s.score", SCORE_DECIMALS)} DESC, dl.paper_id{d.bytes_order}
LIMIT :k"""
    ),
    scatter="top_k",
)


# A term with few postings beside the papers is read whole and each posting checked against the papers (about a
# tenth of a microsecond a posting); a common one is looked up per paper (about fifteen times that a lookup).
def _given_scores(d: Dialect, given: str) -> str:
    """The CTEs that score the papers of a ``given`` CTE (its text): each term read whole with an ``IN`` check,
    or looked up per paper, as its ``read_whole`` flag says."""
    return f"""\
WITH weighted_terms AS MATERIALIZED (
    SELECT {d.field(0, "integer")} AS term_id,
           {d.field(1, "double precision")} AS weight,
           {d.flag(d.field(2, "integer"))} AS read_whole
    FROM {d.items("weights")}
),
given AS MATERIALIZED (
{given}
),
parts AS (
    SELECT tf.doc_id,
           {_checked_part(d, f"w.weight * {_tf_norm(d)}")} AS part
    FROM weighted_terms AS w
    {d.cross_join} term_freq AS tf ON tf.term_id = w.term_id
    LEFT JOIN doc_len AS dl ON dl.doc_id = tf.doc_id
    WHERE w.read_whole
      AND tf.doc_id IN (SELECT doc_id FROM given)
    UNION ALL
    SELECT g.doc_id,
           {_checked_part(d, f"w.weight * {_tf_norm(d)}")} AS part
    FROM given AS g
    {d.cross_join} doc_len AS dl ON dl.doc_id = g.doc_id
    CROSS JOIN weighted_terms AS w
    {d.count_of("w.term_id", "g.doc_id")}
    WHERE NOT w.read_whole
)"""


def _given_papers(d: Dialect) -> str:
    return f"""\
    SELECT dl.doc_id,
           dl.paper_id
    FROM {d.rows("paper_ids", "j")}
    JOIN doc_len AS dl ON dl.paper_id = j.value"""


def _given_docs(d: Dialect) -> str:
    return f"""\
    SELECT {d.typed("value", "integer")} AS doc_id
    FROM {d.rows("doc_ids")}"""


SCORES_FOR_SQL = statement(
    lambda d: (
        f"""\
{_given_scores(d, _given_papers(d))}
SELECT g.paper_id,
       sum(p.part) AS score
FROM parts AS p
JOIN given AS g ON g.doc_id = p.doc_id
GROUP BY g.paper_id
ORDER BY g.paper_id{d.bytes_order}"""
    ),
    scatter="concat",
)

# A filtered top k scores every paper that passes (``retrieval.search.filters``), as ``SCORES_FOR_SQL`` scores
# given papers, and counts those that match at all.
FILTERED_TOP_K_SQL = statement(
    lambda d: (
        f"""\
{_given_scores(d, _given_docs(d))},
scores AS (
    SELECT doc_id,
           sum(part) AS score
    FROM parts
    GROUP BY doc_id
)
SELECT dl.paper_id,
       s.score,
       count(*) OVER () AS matched
FROM scores AS s
{d.paper_of("s.doc_id")}
ORDER BY {d.rounded("s.score", SCORE_DECIMALS)} DESC, dl.paper_id{d.bytes_order}
LIMIT :k"""
    ),
    scatter="top_k_counted",
)

# How many papers contain at least one query term (read from the postings' primary key, no scoring).
MATCHED_SQL = statement(
    lambda d: (
        f"""\
SELECT count(DISTINCT tf.doc_id)
FROM term_freq AS tf
WHERE tf.term_id IN ({d.values("term_ids", "integer")})"""
    ),
    scatter="sum",
)

MATCHED_IN_SQL = statement(
    lambda d: (
        f"""\
SELECT count(DISTINCT tf.doc_id)
FROM term_freq AS tf
WHERE tf.term_id IN ({d.values("term_ids", "integer")})
  AND tf.doc_id IN ({d.values("doc_ids", "integer")})"""
    ),
    scatter="sum",
)

#: Best papers of each sampled term (by what the term gives them) scored to set the first threshold (at least k).
SAMPLE_SIZE = 16
#: A term of the first threshold sample is read whole for its best papers when it has at most this many postings
#: (a commoner one is not sampled: the queries that read common terms are scored from the BLOBs).
SCAN_SAMPLE_MAX_DF = 4096
#: Papers of a threshold sample scored exactly (at least twice k): the best of the sample by its terms' part.
SCORED = 32
#: A plan expected to read more postings than this draws a second, larger threshold sample first.
REFINE_ABOVE = 20_000
#: Best papers per term in that second sample.
REFINE_SAMPLE_SIZE = 256
#: Costs of the pruned statement in units of one posting of the plain aggregation (read and grouped), fitted to
#: timings on the benchmark corpora: a posting read into the pruned statement's candidates (it is materialised
#: and filtered as well), and one primary-key lookup of an unread term for one kept paper.
READ_COST = 2.5
LOOKUP_COST = 0.2
#: ``scores_for`` reads a term whole when it has at most this many postings per paper asked for (measured:
#: reading and checking a posting costs about a fifteenth of looking one up).
READ_WHOLE_RATIO = 16
#: The pruned statement runs when its estimated cost is at most this share of the plain aggregation's.
PRUNE_MARGIN = 0.5
#: A filtered top k takes an unfiltered (pruned) top m of at most this many papers and drops those that fail;
#: a filter that would need more (few papers pass) scores the papers that pass (``FILTERED_TOP_K_SQL``).
OVERFETCH_MAX = 2000
#: The matched count is exact when the query's postings number at most this (a read of their keys); above it,
#: it is estimated from the terms' df as if terms occurred independently, and said to be an estimate.
COUNT_EXACT_MAX = 50_000


def below(term: QueryTerm, read: bool) -> float:
    """The most a posting of ``term`` can contribute to a paper where it was not read (0 when ``read``: every
    posting of a list read whole is found)."""
    return 0.0 if read else term.bound


def cost(term: QueryTerm, read: bool) -> float:
    """The postings of ``term`` read: its df when ``read``, else none (it is looked up per kept paper)."""
    return float(term.df) if read else 0.0


class Plan(namedtuple("Plan", "threshold reads min_partial pruned refined", defaults=(True, False))):
    """What a pruned top-k query decided: the threshold and, per term id, whether its list is read whole
    (True) or only looked up (False). ``pruned`` False: the plain aggregation is expected to be cheaper, and runs
    instead; ``refined``: a second threshold sample raised the threshold."""

    __slots__ = ()

    def to_dict(self) -> dict:
        return {
            "threshold": self.threshold,
            "reads": self.reads,
            "min_partial": self.min_partial,
            "pruned": self.pruned,
        }


def choose_reads(terms: tuple[QueryTerm, ...] | list[QueryTerm], threshold: float) -> dict[int, bool]:
    """Per term id, whether its list is read whole, so that a paper none of whose read postings is found scores
    below ``threshold``: the sum of the bounds of the terms not read must stay under it.

    Greedy, from reading nothing: each step reads the list whose bound is largest per posting read, until the
    sum is below the threshold; with a threshold of 0 every list is read whole.
    """
    if threshold <= 0:
        return {t.term_id: True for t in terms}
    chosen = {t.term_id: False for t in terms}
    total = sum(t.bound for t in terms)
    # Largest bound per posting first, ties by term id (the order the greedy choice reads them in).
    for t in sorted(terms, key=lambda t: (-t.bound / max(1.0, float(t.df)), t.term_id)):
        if total < threshold:
            break
        chosen[t.term_id] = True
        total -= t.bound
    return chosen


def weigh(snap: Snapshot, query: Query, within: WeightedQuery | None = None) -> WeightedQuery:
    """``query`` against the snapshot: each distinct token the index has, with df, weight and bound. ``within``, a
    query weighed in the same snapshot whose terms include all of ``query``'s (a sentence of it), gives the
    index's rows for them without a statement."""
    stats = snap.stats
    query = Query.parse(query, stats.analyser)  # analysed as this index was (stems, stop words): else as it is
    if not query:
        return WeightedQuery(query, (), stats)
    if (
        within is not None
        and within.found is not None
        and within.stats is stats
        and within.query.analyser == query.analyser
        and query.qtf.keys() <= within.query.qtf.keys()
    ):  # a term the index lacks is in neither's rows
        rows = [row for row in within.found if row[0] in query.qtf]
    else:
        generation = stats.info.get("generation")
        rows = known_terms(generation, query.qtf)
        if rows is None:
            rows = terms_of(snap, query.distinct_json)
            _keep_terms(generation, query.qtf, rows)
    terms = tuple(query_term(stats, term, term_id, df, query.qtf[term], max_tf) for term, term_id, df, max_tf in rows)
    return WeightedQuery(query, terms, stats, tuple(rows))


#: ``terms_of``'s rows this process has read, by (index generation, term); None for a term the index lacks. A
#: generation names one state of an index (every writer draws a new one), so what was read at it stays true: a
#: query whose terms were all read before (one asked again, of a server, an agent, an evaluation's modes) is
#: weighed without the statement (``bench/terms_kept.py``).
_TERMS: dict[tuple[str, str], tuple | None] = {}
_TERMS_MAX = 200_000
_UNKNOWN = object()


def known_terms(generation: str | None, terms: Iterable[str]) -> list[tuple] | None:
    """``terms_of``'s rows for ``terms`` read before at ``generation``, in its order (term id), or None when a
    term has not been read at it."""
    if not generation:
        return None
    rows = []
    for term in terms:
        row = _TERMS.get((generation, term), _UNKNOWN)
        if row is _UNKNOWN:
            return None
        if row is not None:
            rows.append(row)
    rows.sort(key=lambda row: row[1])
    return rows


def _keep_terms(generation: str | None, terms: Iterable[str], rows: list[tuple]) -> None:
    if not generation:
        return
    if len(_TERMS) > _TERMS_MAX:
        _TERMS.clear()
    found = {row[0]: row for row in rows}
    for term in terms:
        _TERMS[(generation, term)] = found.get(term)


class TermsAhead:
    """What a snapshot that weighs ``text`` sends with its beginning (``Executor.snapshot(ahead=...)``): the query's
    terms statement, made with an index's statistics; ``query(analyser)`` is the query as ``weigh`` takes it
    (analysed once when the statistics' analyser is the snapshot's)."""

    __slots__ = ("text", "parsed")

    def __init__(self, text: str | Query) -> None:
        self.text = text
        self.parsed: Query | None = None

    def __call__(self, stats: IndexStats) -> list[tuple[str, str, dict]]:
        self.parsed = query = Query.parse(self.text, stats.analyser)
        if not query:
            return []
        statements = []
        if known_terms(stats.info.get("generation"), query.qtf) is None:
            statements.append((TERMS_NAME, TERMS_SQL, _terms_params(stats, query.distinct_json)))
        if "numpy" in sys.modules:  # the BLOBs affordable (costs.NUMPY_IMPORT_COST): their short lists too
            from .blobs import postings_ahead

            statements += postings_ahead(stats.info.get("generation"), sorted(query.qtf))
        return statements

    def query(self, analyser: Analyser) -> Query:
        return Query.parse(self.parsed if self.parsed is not None else self.text, analyser)


TERMS_NAME = "lexical: the query's terms"


def _terms_params(stats: IndexStats, terms_json: str) -> dict:
    return {"terms": terms_json, **_scoring_of(stats)}


def terms_of(snap: Snapshot, terms_json: str, name: str = TERMS_NAME) -> list[tuple]:
    """``TERMS_SQL``'s rows for ``terms_json`` (a JSON list of terms): ``(term, term_id, df, max_tf)`` per term the
    index has, checked (a damaged index is said to be one, not ranked wrongly)."""
    stats = snap.stats
    rows = snap.rows(name, TERMS_SQL, _terms_params(stats, terms_json))
    for term, _, df, max_tf, chunked in rows:
        if not (isinstance(df, int) and 1 <= df <= stats.n_papers) or not isinstance(max_tf, float) or max_tf <= 0:
            raise _damaged(
                snap,
                f"doc_freq gives the term {term!r} df {df!r} in an index of {stats.n_papers:,} papers and its "
                f"postings chunks bound {max_tf!r}",
            )
        if chunked != df:
            raise _damaged(
                snap, f"doc_freq gives the term {term!r} df {df:,}, but its postings chunks hold {chunked:,} postings"
            )
    return [row[:4] for row in rows]


def _damaged(snap: Snapshot, what: str) -> NotAnIndexError:
    where = shown(snap.executor.path)
    return NotAnIndexError(
        f"{where} is damaged: {what}; `retrieval check --db {where}` reports every problem, "
        f"`{build_command(where, snap.stats.info)}` rebuilds it"
    )


def checked(snap: Snapshot, wq: WeightedQuery, rows: list) -> list:
    """``rows`` (``(paper id, score, ...)``, a scoring's) once no score exceeds what the query's terms allow
    together (the sum of their bounds): a score above it comes from a posting whose count or length cannot be
    (``DAMAGED_PART``), or one its chunk's bounds understate (a postings row edited), and a ranking over it would
    be wrong. A paper id of None is a document ``doc_len`` lacks."""
    most = _most(wq)
    for row in rows:
        pid, score = row[0], row[1]
        if pid is None:
            raise _damaged(snap, "the postings of a query term name a document that doc_len lacks")
        if score is None or not score <= most:  # NaN too
            raise _too_high(snap, f"the paper {quoted(pid)}", score, most)
    return rows


def _most(wq: WeightedQuery) -> float:
    """The most a paper can score for ``wq``: the sum of its terms' bounds, with the slack."""
    return sum(t.bound for t in wq.terms) * (1.0 + BOUND_SLACK) + TIE_SLACK


def _too_high(snap: Snapshot, who: str, score: float | None, most: float) -> NotAnIndexError:
    if score is not None and score >= _DAMAGED_ABOVE:
        return _damaged(
            snap,
            f"a posting of {who} for a term of this query has a count or a length that cannot be (term_freq.count "
            "not a whole number from 1 to the paper's doc_len.length, or doc_len.length not a number)",
        )
    return _damaged(
        snap,
        f"{who} scores {score!r} for this query, above the {most!r} its terms' postings chunks allow: the chunks' "
        "bounds (postings.max_count, min_length) and the term_freq counts or doc_len lengths disagree",
    )


def query_term(stats, term: str, term_id: int, df: int, qtf: float, max_tf: float) -> QueryTerm:
    """A query term weighing ``qtf * idf``, its bound ``weight * max_tf`` with the relative slack."""
    weight = qtf * idf(stats.n_papers, df)
    return QueryTerm(term, term_id, df, qtf, weight, weight * max_tf * (1.0 + BOUND_SLACK))


def _scoring_of(stats) -> dict:
    return {"k1": stats.k1, "b": stats.b, "avgdl": stats.avgdl}


def _scoring(wq: WeightedQuery) -> dict:
    return _scoring_of(wq.stats)


def _sample(terms: list[QueryTerm], size: int, scored: int, max_df: float = SCAN_SAMPLE_MAX_DF) -> dict:
    """Parameters of ``THRESHOLD_SQL`` for the first ``SAMPLE_TERMS`` of ``terms``, each read whole for its
    best ``size`` papers when it has at most ``max_df`` postings (else -1: not sampled), of which the best
    ``scored`` are scored exactly."""
    slots: dict[str, int | float] = {}
    chosen = terms[:SAMPLE_TERMS]
    for i in range(1, SAMPLE_TERMS + 1):
        t = chosen[i - 1] if i <= len(chosen) else None
        slots[f"scan_{i}"] = t.term_id if t is not None and t.df <= max_df else -1
        slots[f"weight_{i}"] = t.weight if t is not None else 0.0
    return {**slots, "sample_size": size, "scored": scored}


def _threshold(snap: Snapshot, wq: WeightedQuery, sample: dict, k: int, name: str) -> float:
    """The k-th best exact score in the sample (0 when it has fewer than k papers), less the slack."""
    params = {"weights": wq.weights_json, **_scoring(wq), **sample, "k": k}
    row = snap.one(name, THRESHOLD_SQL, params)
    if not row or row[0] is None:
        return 0.0
    if not row[0] <= _most(wq):  # a threshold above every score would prune every paper
        raise _too_high(snap, "a paper of the threshold's sample", row[0], _most(wq))
    return max(0.0, row[0] * (1.0 - BOUND_SLACK) - TIE_SLACK)


def bound_order(terms: tuple[QueryTerm, ...] | list[QueryTerm]) -> list[QueryTerm]:
    """``terms`` by the most one posting can contribute, largest first (ties by term id)."""
    return sorted(terms, key=lambda t: (-t.bound, t.term_id))


def estimated_cost(terms: tuple[QueryTerm, ...], reads: dict[int, bool], n_papers: int) -> float:
    """The pruned statement's rough cost, in postings of the plain aggregation: the postings it reads
    (``READ_COST`` each) and a lookup (``LOOKUP_COST``) per term of each stage per paper still kept, assuming
    every paper read is kept into the first stage and a quarter of them into each later one."""
    read = sum(cost(t, reads[t.term_id]) for t in terms)
    kept = min(float(n_papers), read)
    lookups = 0.0
    for group in stages(terms, reads):
        lookups += kept * len(group)
        kept /= 4.0
    return READ_COST * read + LOOKUP_COST * lookups


def plan(snap: Snapshot, wq: WeightedQuery, k: int, sample_size: int = SAMPLE_SIZE, refine: bool = True) -> Plan:
    """The plan of ``wq``'s top ``k``: ``THRESHOLD_SQL`` once, and once more (``refined``) when ``refine`` and
    the plan would read many postings."""
    scored = max(SCORED, 2 * k)
    threshold = _threshold(
        snap, wq, _sample(bound_order(wq.terms), max(sample_size, k), scored), k, "lexical: threshold"
    )
    chosen = _planned(wq, threshold, choose_reads(wq.terms, threshold))
    return refined(snap, wq, k, chosen) if refine else chosen


def refined(snap: Snapshot, wq: WeightedQuery, k: int, chosen: Plan) -> Plan:
    """``chosen``, or where it would read more than ``REFINE_ABOVE`` postings, the plan of a second, larger
    threshold sample from the terms it would read (whatever their df: it reads them anyway), if that raises the
    threshold (each sample's k-th score is a lower bound of the true one); often the plan becomes cheap."""
    terms, reads = wq.terms, chosen.reads
    if sum(cost(t, reads[t.term_id]) for t in terms) <= REFINE_ABOVE:
        return chosen
    costly = sorted(terms, key=lambda t: (-cost(t, reads[t.term_id]), t.term_id))
    sample = _sample(costly, max(REFINE_SAMPLE_SIZE, k), max(SCORED, 2 * k), float("inf"))
    second = _threshold(snap, wq, sample, k, "lexical: threshold, second sample")
    if second <= chosen.threshold:
        return chosen
    return _planned(wq, second, choose_reads(terms, second), refined=True)


def _planned(wq: WeightedQuery, threshold: float, reads: dict[int, bool], refined: bool = False) -> Plan:
    terms = wq.terms
    unread = sum(below(t, reads[t.term_id]) for t in terms)
    # The plain aggregation reads every list once; the pruned statement is chosen when it is expected to do at
    # most PRUNE_MARGIN as much (its estimate is rough, and wrong the other way costs more than the plain one).
    pruned = estimated_cost(terms, reads, wq.stats.n_papers) < PRUNE_MARGIN * sum(t.df for t in terms)
    min_partial = threshold - unread if threshold > 0 else float("-inf")
    return Plan(threshold, reads, min_partial, pruned, refined)


def stages(terms: tuple[QueryTerm, ...], reads: dict[int, bool]) -> list[list[QueryTerm]]:
    """The terms a pruned plan looks up (those not read whole), in ``LOOKUP_STAGES`` groups: largest unread bound
    first, the groups growing (an eighth, an eighth, a quarter, a half), so the papers that cannot reach the
    threshold are dropped after the few lookups that lower their bound most."""
    looked_up = sorted((t for t in terms if not reads[t.term_id]), key=lambda t: (-t.bound, t.term_id))
    n = len(looked_up)
    edges = [0, -(-n // 8), -(-n // 4), -(-n // 2), n]
    return [looked_up[edges[i] : edges[i + 1]] for i in range(LOOKUP_STAGES)]


def top_k_params(wq: WeightedQuery, chosen: Plan, k: int) -> dict:
    """The parameters of ``TOP_K_SQL`` for ``chosen``: the read plan, each lookup stage's terms and the partial
    score a paper needs before each stage (the threshold less the bounds of the terms not yet looked up)."""
    reads = chosen.reads
    entries = [[t.term_id, int(reads[t.term_id]), t.weight] for t in wq.terms]
    groups = stages(wq.terms, reads)
    threshold = chosen.threshold if chosen.threshold > 0 else float("-inf")
    remaining = sum(below(t, reads[t.term_id]) for group in groups for t in group)
    params = {"plan": json.dumps(entries), **_scoring(wq), "min_partial": chosen.min_partial, "k": k}
    for i, group in enumerate(groups, start=1):
        params[f"need_{i}"] = threshold - remaining
        params[f"lookups_{i}"] = json.dumps([[t.term_id, int(reads[t.term_id]), t.weight] for t in group])
        remaining -= sum(below(t, reads[t.term_id]) for t in group)
    params["threshold"] = threshold
    return params


def top_papers(
    snap: Snapshot,
    wq: WeightedQuery,
    k: int,
    exhaustive: bool = False,
    sample_size: int = SAMPLE_SIZE,
    path: str | None = None,
) -> tuple[list[tuple[str, float]], Plan | None]:
    """The top ``k`` ``(paper id, score)`` pairs of ``wq``, best first, ties by id, and the plan that found them
    (None when nothing was planned: no term in the index, ``exhaustive``, or the BLOB path).

    ``path`` chooses where the scores come from: ``"sql"`` (the aggregation over ``term_freq``, planned),
    ``"blobs"`` (the postings BLOBs in NumPy, ``retrieval.search.blobs``) or None, the cost model's choice
    (``blob_path``). ``exhaustive`` runs the plain aggregation, the reference every other path equals."""
    if not wq.terms or k <= 0:
        return [], None
    choice = _path_before_plan(snap, wq, path, exhaustive)
    chosen = None
    if not choice and not exhaustive:
        chosen = plan(snap, wq, k, sample_size, refine=choice is not None)
        if choice is None:  # planned first: the BLOBs, if cheaper than the rest of this plan (before refining it)
            choice = blobs_after_plan(wq, chosen, sql_factor(snap))
            chosen = None if choice else refined(snap, wq, k, chosen)
    if choice:
        from .blobs import top_k

        return checked(snap, wq, top_k(snap, wq, k)), None
    if chosen is None or not chosen.pruned:
        params = {"weights": wq.weights_json, **_scoring(wq), "k": k}
        rows = snap.rows("lexical: top-k (plain aggregation)", EXHAUSTIVE_SQL, params)
    else:
        rows = snap.rows("lexical: top-k", TOP_K_SQL, top_k_params(wq, chosen, k))
    return [(pid, score) for pid, score in checked(snap, wq, rows)], chosen


def _path_before_plan(snap: Snapshot, wq: WeightedQuery, path: str | None, exhaustive: bool) -> bool | None:
    """``path`` forced (``"blobs"``: True; ``"sql"`` or ``exhaustive``: False), else ``blob_path``'s choice."""
    if exhaustive or path == "sql":
        return False
    return True if path == "blobs" else blob_path(wq, sql_factor(snap))


def sql_factor(snap: Snapshot) -> float:
    """The multiple of the SQL path's costs on ``snap``'s backend (``costs.SQL_FACTOR``)."""
    return costs.sql_factor(snap.executor.dialect)


def blob_path(wq: WeightedQuery, factor: float = 1.0) -> bool | None:
    """Where the cost model (``retrieval.search.costs``) sends ``wq``'s top k before any plan: True, the postings
    BLOBs (``retrieval.search.blobs``); False, SQL over ``term_freq``; None, plan in SQL first, and choose then
    (``blobs_after_plan``): a query of few terms, one of them rare enough to sample a threshold from, whose
    pruning varies most. Many terms, or only common ones, are costed as SQL reads them (a share, or all); a
    query the BLOBs answer in less than SQL's two statements, or than ``costs.PLAN_ABOVE``, goes there
    unplanned. ``factor``: SQL's costs on the backend, a multiple of SQLite's (``sql_factor``)."""
    postings = sum(t.df for t in wq.terms)
    sampled = any(t.df <= SCAN_SAMPLE_MAX_DF for t in wq.terms)
    blobs = costs.blobs(postings, len(wq.terms), wq.stats.n_papers)
    if blobs <= max(costs.PLAN_ABOVE, factor * costs.sql_least(len(wq.terms))):
        return True
    if sampled and len(wq.terms) <= costs.FEW_TERMS:
        return None
    sql = factor * costs.sql_unplanned(postings, len(wq.terms), sampled)
    if sql > blobs:
        return True
    costs.NUMPY.forgo(sql, costs.blobs_imported(postings, len(wq.terms), wq.stats.n_papers))
    return False


def blobs_after_plan(wq: WeightedQuery, chosen: Plan, factor: float = 1.0) -> bool:
    """Whether the BLOBs are expected to cost less than the rest of the SQL path once ``chosen`` is known: its
    top-k statement, pruned (``estimated_cost``) or the plain aggregation over every posting, times ``factor``
    (``blob_path``'s). In a process without NumPy its import is charged, so a query SQL prunes well never imports
    it, until such queries have paid for it (``costs.NUMPY``: the plan's statement counted as theirs)."""
    postings = sum(t.df for t in wq.terms)
    work = estimated_cost(wq.terms, chosen.reads, wq.stats.n_papers) if chosen.pruned else None
    sql = factor * costs.sql_planned(work, postings, len(wq.terms))
    if sql > costs.blobs(postings, len(wq.terms), wq.stats.n_papers):
        return True
    imported = costs.blobs_imported(postings, len(wq.terms), wq.stats.n_papers)
    if sql > imported:
        costs.NUMPY.forgo(sql + factor * costs.sql_statement(len(wq.terms)), imported)
    return False


def _read_whole(wq: WeightedQuery, papers: int) -> str:
    most = READ_WHOLE_RATIO * papers
    return json.dumps([[t.term_id, t.weight, int(t.df <= most)] for t in wq.terms])


class Matched(namedtuple("Matched", "count exact")):
    """How many papers contain at least one query term (and pass the filter): exact, or an estimate."""

    __slots__ = ()


def matched(snap: Snapshot, wq: WeightedQuery) -> Matched:
    """How many papers contain at least one of ``wq``'s terms: df for one term, a count of the postings' paper
    ids up to ``COUNT_EXACT_MAX`` postings, else ``N * (1 - prod(1 - df / N))``, an estimate."""
    if not wq.terms:
        return Matched(0, True)
    if len(wq.terms) == 1:
        return Matched(wq.terms[0].df, True)
    total = sum(t.df for t in wq.terms)
    if total <= COUNT_EXACT_MAX:
        ids = json.dumps([t.term_id for t in wq.terms])
        return Matched(snap.rows("lexical: papers matched", MATCHED_SQL, {"term_ids": ids})[0][0], True)
    n = wq.stats.n_papers
    missed = 1.0
    for t in wq.terms:
        missed *= 1.0 - t.df / n
    return Matched(max(max(t.df for t in wq.terms), round(n * (1.0 - missed))), False)


def filtered_top_papers(
    snap: Snapshot, wq: WeightedQuery, k: int, allowed: Passing, exhaustive: bool = False, path: str | None = None
) -> tuple[list[tuple[str, float]], Matched]:
    """The top ``k`` of ``wq`` among the papers ``allowed`` lets pass (``retrieval.search.filters``), best
    first, ties by id, and how many of them match the query.

    Where enough papers pass, the unfiltered (pruned) top ``m`` is taken and the papers that fail dropped, ``m``
    from the share that passes and grown fourfold until ``k`` are left or every matching paper was read: exact,
    since in the order of score then id, the first ``k`` passing papers of a prefix are the first ``k`` of all.
    Where ``m`` would exceed ``OVERFETCH_MAX`` (few pass), or ``exhaustive``, the papers that pass are scored.
    On the BLOB path (``path``, as ``top_papers``) the filter is a predicate on the candidates of one scoring."""
    if not wq.terms or k <= 0 or allowed.count == 0:
        return [], Matched(0, True)
    n = max(1, wq.stats.n_papers)
    m = max(2 * k, math.ceil(1.5 * k * n / allowed.count))
    choice = _path_before_plan(snap, wq, path, exhaustive)
    if choice is None:  # planned as the unfiltered top m it would take
        choice = m <= OVERFETCH_MAX and blobs_after_plan(wq, plan(snap, wq, m, refine=False), sql_factor(snap))
    if choice:
        from .blobs import top_k

        return checked(snap, wq, top_k(snap, wq, k, allowed)), _matched_passing(snap, wq, allowed)
    while not exhaustive and m <= OVERFETCH_MAX:
        hits, _ = top_papers(snap, wq, m, path="sql")
        dropped = set(failing(snap, [pid for pid, _ in hits], allowed))
        kept = [hit for hit in hits if hit[0] not in dropped]
        if len(kept) >= k or len(hits) < m:
            return kept[:k], _matched_passing(snap, wq, allowed)
        m *= 4
    docs = allowed.allowed
    if docs is None:  # most papers pass: the list of those that do
        rejected = set(allowed.rejected)
        docs = [doc for doc in every_doc(snap) if doc not in rejected]
    params = {"weights": _read_whole(wq, len(docs)), **_scoring(wq), "doc_ids": json.dumps(docs), "k": k}
    rows = checked(snap, wq, snap.rows("lexical: top-k of the papers that pass the filter", FILTERED_TOP_K_SQL, params))
    return [(pid, score) for pid, score, _ in rows], Matched(rows[0][2] if rows else 0, True)


def _matched_passing(snap: Snapshot, wq: WeightedQuery, allowed: Passing) -> Matched:
    """How many papers contain a query term and pass: counted (within those that pass, or all less those that
    fail) where the count is exact, else the estimate scaled by the share that passes."""
    found = matched(snap, wq)
    if not found.exact:
        return Matched(round(found.count * allowed.count / max(1, wq.stats.n_papers)), False)
    ids = json.dumps([t.term_id for t in wq.terms])
    if allowed.allowed is not None:
        params = {"term_ids": ids, "doc_ids": json.dumps(allowed.allowed)}
        return Matched(snap.rows("lexical: papers matched that pass", MATCHED_IN_SQL, params)[0][0], True)
    if not allowed.rejected:
        return found
    params = {"term_ids": ids, "doc_ids": json.dumps(allowed.rejected)}
    return Matched(found.count - snap.rows("lexical: papers matched that fail", MATCHED_IN_SQL, params)[0][0], True)


def scores_for(snap: Snapshot, wq: WeightedQuery, paper_ids: list[str], path: str | None = None) -> dict[str, float]:
    """BM25 score of each paper in ``paper_ids`` (0.0 for one that shares no term with the query). From the
    postings BLOBs where the cost model sends the query there (``blob_path``); else in SQL, where a term with at
    most ``READ_WHOLE_RATIO`` postings per paper asked for is read whole, a commoner one looked up per paper.
    ``path`` as ``top_papers``'s."""
    from_blobs = path == "blobs" or (path is None and (snap.kept or blob_path(wq, sql_factor(snap))))
    if wq.terms and paper_ids and from_blobs:
        from .blobs import scores  # the lists a long query's top k read are kept by the snapshot: read for free

        found = scores(snap, wq, paper_ids)
        checked(snap, wq, list(found.items()))
        return found
    result = dict.fromkeys(paper_ids, 0.0)
    if paper_ids and wq.terms:
        params = {"weights": _read_whole(wq, len(result)), **_scoring(wq), "paper_ids": json.dumps(list(result))}
        result.update(checked(snap, wq, snap.rows("lexical: bm25 of given papers", SCORES_FOR_SQL, params)))
    return result


class BM25Index:
    """Okapi BM25 (k1=1.5, b=0.75, idf = ln(1 + (N - df + 0.5)/(df + 0.5))) over an index: the exact top k,
    pruned by the postings chunks' bounds (see the module's docstring). Each call reads one snapshot (or joins the
    executor's current one)."""

    def __init__(self, executor: Executor, sample_size: int = SAMPLE_SIZE, path: str | None = None) -> None:
        self._executor = executor
        self.sample_size = sample_size
        self.path = path  # "sql", "blobs", or None: the cost model's choice per query (``top_papers``)
        self.refined = 0  # how many plans a second threshold sample changed (for benchmarks)

    def search(
        self, query: str | Query, top_k: int = 10, exhaustive: bool = False, filters: Filters | None = None
    ) -> list[tuple[str, float]]:
        """The top ``top_k`` ``(paper id, score)`` pairs, best first, ties by id; empty for a query with no token.

        ``exhaustive`` scores every posting of the query's terms instead of pruning (same result, slower);
        ``filters`` (``retrieval.search.filters.Filters``) ranks only the papers that pass them."""
        check_int("top_k", top_k, 0)  # 2.5 reached the SQL as a limit: "cannot read the index (datatype mismatch)"
        ahead = TermsAhead(query)
        with self._executor.snapshot(ahead) as snap:
            wq = weigh(snap, ahead.query(snap.stats.analyser))
            if filters:
                return filtered_top_papers(snap, wq, top_k, passing(snap, filters), exhaustive, self.path)[0]
            hits, chosen = top_papers(snap, wq, top_k, exhaustive, self.sample_size, self.path)
        self.refined += bool(chosen and chosen.refined)
        return hits

    def matched(self, query: str | Query, filters: Filters | None = None) -> Matched:
        """How many papers contain a term of ``query`` (and pass ``filters``)."""
        ahead = TermsAhead(query)
        with self._executor.snapshot(ahead) as snap:
            wq = weigh(snap, ahead.query(snap.stats.analyser))
            if filters:
                return filtered_top_papers(snap, wq, 1, passing(snap, filters))[1]
            return matched(snap, wq)

    def plan(self, query: str | Query, top_k: int = 10) -> Plan | None:
        """The plan of ``query``'s top ``top_k`` (None when no query term is in the index)."""
        with self._executor.snapshot() as snap:
            wq = weigh(snap, Query.parse(query))
            return plan(snap, wq, top_k, self.sample_size) if wq.terms and top_k > 0 else None  # SQL's plan

    def scores(self, query: str | Query, paper_ids: list[str]) -> dict[str, float]:
        """BM25 score of each paper in ``paper_ids`` (one id, or a list) for ``query`` (0.0 for one that shares no
        term with it)."""
        paper_ids = paper_id_list(paper_ids, "paper_ids")
        with self._executor.snapshot() as snap:
            return scores_for(snap, weigh(snap, Query.parse(query)), paper_ids, self.path)
