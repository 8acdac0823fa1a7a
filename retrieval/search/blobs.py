"""The lexical pass over the postings BLOBs (``retrieval.store.postings``), scored exactly in NumPy: the path for
queries whose lists are long (pasted abstracts, drafts, common terms, deep top k), where SQL pays per posting row.

Okapi BM25 as ``retrieval.bm25`` defines it (Lucene's idf, k1 and b read from the index), each posting's part
computed with the same operations in the same order as the SQL (``weight * count * (k1 + 1) / (count + k1 *
(1 - b + b * length / avgdl))``), so every part is the same double; only the order of a paper's additions differs,
which the ranking's rounding to ``SCORE_DECIMALS`` places absorbs. One statement reads every chunk of every query
term (``POSTINGS_SQL``: one round trip on PostgreSQL too), and ``top_k`` runs term-at-a-time MaxScore over a dense
score array:

1. Each term's bound is its weight times the largest ``tf_norm(max_count, min_length)`` of its chunks (exact at
   any average length). Terms are scored whole, largest bound first, into the dense array.
2. After enough postings have been added, the k-th best partial score is a lower bound of the final k-th score
   (parts are positive): the *threshold*. Once the bounds of the terms not yet scored add up to less than it,
   a paper found in none of the scored terms cannot reach the top k, and those terms become non-essential.
3. The papers already found that can still reach the threshold are the candidates; each non-essential term's
   chunks are searched for them only (``searchsorted``), the candidates that fall behind dropped after each
   term.
4. The best k candidates by score rounded to ``SCORE_DECIMALS`` places, ties by paper id (every paper tied with
   the k-th is looked up, so the tie breaks as in SQL).

Bounds carry a relative slack of ``BOUND_SLACK`` and the threshold an absolute ``TIE_SLACK``, as in the SQL path,
so a paper left out provably ranks below the k-th: the result equals the plain aggregation (tested).
"""

from __future__ import annotations

import json

import numpy as np

from ..bm25 import BOUND_SLACK, SCORE_DECIMALS, TIE_SLACK
from ..store.dialect import register
from ..store.executor import Snapshot
from ..store.postings import decode, unpack
from .filters import Passing
from .query import WeightedQuery


def _in_list(sql: str, parameter: str, integers: bool) -> str:
    """Register ``sql``, whose one list parameter is read by ``IN (SELECT value FROM json_each(:parameter))``,
    with its PostgreSQL text: the list as ``= ANY (ARRAY(...))`` (an index lookup per value there), its values
    cast to integers when ``integers`` (doc and term ids)."""
    values = f"jsonb_array_elements_text(CAST(:{parameter} AS jsonb))"
    if integers:
        values = f"CAST({values} AS integer)"
    return register(
        sql, sql.replace(f"IN (SELECT value FROM json_each(:{parameter}))", f"= ANY (ARRAY(SELECT {values}))")
    )


POSTINGS_SQL = """\
SELECT p.term_id,
       p.first_doc,
       p.last_doc,
       p.df,
       p.max_count,
       p.min_length,
       p.doc_ids,
       p.counts,
       p.lengths
FROM postings AS p
WHERE p.term_id IN (SELECT value FROM json_each(:term_ids))
ORDER BY p.term_id, p.first_doc"""
_in_list(POSTINGS_SQL, "term_ids", integers=True)

PAPER_IDS_SQL = """\
SELECT dl.doc_id,
       dl.paper_id
FROM doc_len AS dl
WHERE dl.doc_id IN (SELECT value FROM json_each(:doc_ids))"""
_in_list(PAPER_IDS_SQL, "doc_ids", integers=True)

DOC_IDS_SQL = """\
SELECT dl.paper_id,
       dl.doc_id
FROM doc_len AS dl
WHERE dl.paper_id IN (SELECT value FROM json_each(:paper_ids))"""
_in_list(DOC_IDS_SQL, "paper_ids", integers=False)

#: The threshold is first taken once the terms added whole hold this share of the dense array's size in postings
#: (taking it reads the whole array), then each time they have grown ``THRESHOLD_GROWTH``-fold; each time, the
#: terms left may turn out non-essential, and the candidates few enough to search for.
FIRST_THRESHOLD_SHARE = 0.125
THRESHOLD_GROWTH = 4
#: A non-essential term is searched for the candidates (a binary search each) rather than added whole once its
#: postings outnumber them this many times.
SPARSE_RATIO = 8
#: Chunks shorter than this are scored together, in one pass over all of them.
SHORT_CHUNK = 4096


class _Term:
    """A query term's chunks, weight and bound."""

    __slots__ = ("chunks", "weight", "bound", "df")

    def __init__(self, weight: float) -> None:
        self.chunks: list[tuple] = []
        self.weight = weight
        self.bound = 0.0
        self.df = 0


class _Scoring:
    """BM25's parameters for one query, and each paper length's part of the tf_norm denominator, ``k1 * (1.0 - b
    + b * length / avgdl)``, computed once per length (the same doubles as computed per posting)."""

    __slots__ = ("k1", "b", "avgdl", "norms")

    def __init__(self, k1: float, b: float, avgdl: float) -> None:
        self.k1, self.b, self.avgdl = k1, b, avgdl
        self.norms = np.empty(0)

    def parts(self, weight: float | np.ndarray, counts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Each posting's part of the score: the SQL's ``weight * count * (k1 + 1.0) / (count + k1 * (1.0 - b + b
        * length / avgdl))``, operation for operation (``weight``: the term's, or one per posting)."""
        longest = int(lengths.max())
        if len(self.norms) <= longest:
            every = np.arange(max(longest + 1, 2 * len(self.norms)), dtype=np.float64)
            self.norms = self.k1 * (1.0 - self.b + self.b * every / self.avgdl)
        c = counts.astype(np.float64)
        return weight * c * (self.k1 + 1.0) / (c + self.norms[lengths])


def read(snap: Snapshot, wq: WeightedQuery) -> tuple[list[_Term], int]:
    """The query's terms with their chunks, largest bound first (ties by term id), and the dense array's size
    (the largest doc id read, plus one)."""
    stats = wq.stats
    k1, b, avgdl = stats.k1, stats.b, stats.avgdl  # the bounds, computed as the SQL path computes them
    weights = {t.term_id: t.weight for t in wq.terms}
    term_ids = json.dumps(sorted(weights))
    rows = snap.kept.get(("postings", term_ids))
    if rows is None:  # read once per snapshot: scoring the graph's candidates reads the same lists again
        rows = snap.rows("lexical: the query terms' postings (BLOBs)", POSTINGS_SQL, {"term_ids": term_ids})
        snap.kept.clear()
        snap.kept[("postings", term_ids)] = rows
    terms: dict[int, _Term] = {}
    size = 0
    for row in rows:
        term_id, _, last_doc, df, max_count, min_length = row[:6]
        term = terms.get(term_id)
        if term is None:
            term = terms[term_id] = _Term(weights[term_id])
        term.chunks.append(row)
        term.df += df
        bound = max_count * (k1 + 1.0) / (max_count + k1 * (1.0 - b + b * min_length / avgdl))
        term.bound = max(term.bound, term.weight * bound * (1.0 + BOUND_SLACK))
        size = max(size, last_doc + 1)
    order = sorted(terms.items(), key=lambda item: (-item[1].bound, item[0]))
    return [term for _, term in order], size


def _mask(passing: Passing, size: int) -> np.ndarray:
    if passing.allowed is not None:
        mask = np.zeros(size, dtype=bool)
        allowed = np.asarray(passing.allowed, dtype=np.int64)
        mask[allowed[allowed < size]] = True
    else:
        mask = np.ones(size, dtype=bool)
        rejected = np.asarray(passing.rejected, dtype=np.int64)
        mask[rejected[rejected < size]] = False
    return mask


def _kth(values: np.ndarray, k: int) -> float:
    """The threshold from partial scores: their k-th largest less the slack (0 if fewer than k are positive)."""
    if len(values) < k:
        return 0.0
    kth = float(np.partition(values, len(values) - k)[len(values) - k])
    return max(0.0, kth * (1.0 - BOUND_SLACK) - TIE_SLACK)


def top_k(snap: Snapshot, wq: WeightedQuery, k: int, passing: Passing | None = None) -> list[tuple[str, float]]:
    """The top ``k`` ``(paper id, score)`` pairs of ``wq``, best first (scores rounded to ``SCORE_DECIMALS``
    places, ties by paper id), among the papers ``passing`` lets through (all when None)."""
    terms, size = read(snap, wq)
    if not terms or k <= 0:
        return []
    scoring = _Scoring(wq.stats.k1, wq.stats.b, wq.stats.avgdl)
    mask = _mask(passing, size) if passing is not None else None
    rest = [0.0] * (len(terms) + 1)  # rest[i]: the bounds of terms i, i + 1, ... added up
    for i in range(len(terms) - 1, -1, -1):
        rest[i] = rest[i + 1] + terms[i].bound
    acc = np.zeros(size, dtype=np.float64)
    threshold = 0.0
    scored = 0
    check = FIRST_THRESHOLD_SHARE * size
    sparse: tuple[np.ndarray, np.ndarray] | None = None  # the candidates and their partial scores, once few
    i = 0
    while i < len(terms) and sparse is None:
        # The terms up to the next threshold, added whole in one pass (a group, not a term at a time: a short
        # list costs NumPy more per call than per posting).
        group = i
        while group < len(terms):
            scored += terms[group].df
            group += 1
            if scored >= check:
                break
        _add_whole(terms[i:group], acc, scoring)
        i = group
        if i == len(terms):
            break
        threshold = _kth(acc if mask is None else acc[mask], k)
        check = THRESHOLD_GROWTH * scored
        if threshold > 0 and rest[i] < threshold:
            # The terms left are non-essential: a paper none of the terms scored so far holds cannot reach the
            # threshold, nor can one whose partial score plus their bounds falls short of it.
            candidates = np.flatnonzero(acc >= threshold - rest[i])
            if mask is not None:
                candidates = candidates[mask[candidates]]
            if len(candidates) * SPARSE_RATIO <= terms[i].df:  # else adding the next term whole is cheaper
                sparse = candidates, acc[candidates]
    for j in range(i, len(terms)):  # the non-essential terms, searched for the candidates only
        candidates, found = sparse
        _add_found(terms[j], candidates, found, scoring)
        keep = found + rest[j + 1] >= threshold
        candidates, found = candidates[keep], found[keep]
        threshold = max(threshold, _kth(found, k))  # the candidates' partial scores are lower bounds too
        sparse = candidates, found
    if sparse is None:
        candidates = np.flatnonzero(acc)
        if mask is not None:
            candidates = candidates[mask[candidates]]
        sparse = candidates, acc[candidates]
    return _best(snap, *sparse, k)


def _add_whole(terms: list[_Term], acc: np.ndarray, scoring: _Scoring) -> None:
    """Add the part of the score each of ``terms`` gives every paper it holds to the dense array ``acc``: a long
    chunk straight in, the short ones gathered into one pass (NumPy costs more per call than per posting there)."""
    docs, counts, lengths, weights, sizes = [], [], [], [], []
    for term in terms:
        for _, first, _, df, _, _, doc_ids, c, n in term.chunks:
            d, c, n = decode(first, df, doc_ids, c, n)
            if df >= SHORT_CHUNK:
                acc[d] += scoring.parts(term.weight, c, n)  # a term's doc ids are distinct
                continue
            docs.append(d)
            counts.append(c)
            lengths.append(n)
            weights.append(term.weight)
            sizes.append(df)
    if docs:
        parts = scoring.parts(np.repeat(weights, sizes), np.concatenate(counts), np.concatenate(lengths))
        acc += np.bincount(np.concatenate(docs), weights=parts, minlength=len(acc))


def _add_found(term: _Term, docs: np.ndarray, acc: np.ndarray, scoring: _Scoring) -> None:
    """Add ``term``'s part of the score of each of ``docs`` (ascending doc ids) that it holds to ``acc`` (aligned
    with ``docs``): each chunk is searched for the docs in its range only."""
    for _, first, last, df, _, _, doc_ids, counts, lengths in term.chunks:
        lo, hi = np.searchsorted(docs, (first, last + 1))
        if lo == hi:
            continue
        # Searched as stored (offsets from first_doc, in their own width): no pass over the chunk.
        offsets = unpack(doc_ids, df)
        wanted = (docs[lo:hi] - first).astype(offsets.dtype)
        at = np.minimum(np.searchsorted(offsets, wanted), df - 1)
        hit = offsets[at] == wanted
        if hit.any():
            at = at[hit]
            part = acc[lo:hi]  # a view: the parts land in acc
            part[hit] += scoring.parts(term.weight, unpack(counts, df)[at], unpack(lengths, df)[at])


def scores(snap: Snapshot, wq: WeightedQuery, paper_ids: list[str]) -> dict[str, float]:
    """The BM25 score of each paper in ``paper_ids`` (0.0 for one that shares no term with the query, or is not
    in the index), each term's chunks searched for the papers' doc ids."""
    result = dict.fromkeys(paper_ids, 0.0)
    if not result or not wq.terms:
        return result
    found = snap.rows("lexical: the given papers' doc ids", DOC_IDS_SQL, {"paper_ids": json.dumps(list(result))})
    if not found:
        return result
    found.sort(key=lambda row: row[1])
    docs = np.array([doc for _, doc in found], dtype=np.int64)
    acc = np.zeros(len(docs), dtype=np.float64)
    terms, _ = read(snap, wq)
    scoring = _Scoring(wq.stats.k1, wq.stats.b, wq.stats.avgdl)
    for term in terms:
        _add_found(term, docs, acc, scoring)
    result.update(zip((pid for pid, _ in found), acc.tolist(), strict=True))
    return result


def _best(snap: Snapshot, docs: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[str, float]]:
    """The best ``k`` of ``docs`` by score rounded to ``SCORE_DECIMALS`` places, then paper id: every doc whose
    score is within the rounding of the k-th is looked up, so ties break on the id as SQL breaks them."""
    if len(docs) > k:
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        near = scores >= kth - 10.0**-SCORE_DECIMALS
        docs, scores = docs[near], scores[near]
    if not len(docs):
        return []
    score_of = dict(zip(docs.tolist(), scores.tolist(), strict=True))
    rows = snap.rows("lexical: the best papers' ids", PAPER_IDS_SQL, {"doc_ids": json.dumps(sorted(score_of))})
    ranked = sorted(((pid, score_of[doc]) for doc, pid in rows), key=lambda h: (-round(h[1], SCORE_DECIMALS), h[0]))
    return ranked[:k]
