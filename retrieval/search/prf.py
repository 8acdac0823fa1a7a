"""Pseudo-relevance feedback: RM3, the relevance model of Lavrenko & Croft (2001) interpolated with the query, as
Anserini implements it (``Rm3Reranker``), scored with exact BM25 through the lexical path.

Steps, in one snapshot:

1. The query's BM25 top ``fb_docs`` (default 10) are the feedback documents ``D``, each with its score ``s(D)``.
2. Each feedback document's terms are its title and abstract analysed as the index analyses them; ``p(t|D) =
   tf(t, D) / |D|``, where only the *feedback terms* count (in ``tf`` and in ``|D|``): terms of at least two
   characters, in the index, and in at most ``MAX_DF_RATIO`` (10%) of its papers (Anserini's filter).
3. The relevance model ``rm(t) = sum over D of p(t|D) * s(D)`` (the BM25 score stands for ``P(Q|D)``, as in
   Anserini), cut to its ``fb_terms`` (default 10) heaviest terms (ties by term) and scaled to sum 1.
4. The query model ``q(t) = qtf(t) / sum qtf`` over the query's terms the index has, and the expanded query
   ``w(t) = original_weight * q(t) + (1 - original_weight) * rm(t)`` (default original weight 0.5).
5. The expanded query is a ``WeightedQuery`` whose term ``t`` weighs ``w(t) * idf(t)``: its BM25 score is
   ``sum_t w(t) * idf(t) * tf_norm(t, D)``, computed by the same statements as any query (``lexical.top_papers``,
   ``lexical.scores_for``), exactly.
"""

from __future__ import annotations

import json
from collections import Counter, namedtuple

from ..store.sql.executor import Snapshot
from . import lexical
from .filters import Passing
from .papers import PAPERS_SQL
from .query import Query, WeightedQuery

#: Anserini's defaults (``-rm3``: fbDocs 10, fbTerms 10, originalQueryWeight 0.5).
FB_DOCS = 10
FB_TERMS = 10
ORIGINAL_WEIGHT = 0.5
#: A term in more than this share of the index's papers is no feedback term (Anserini's ``df / N > 0.1``).
MAX_DF_RATIO = 0.1
#: Feedback terms have at least this many characters.
MIN_TERM_CHARS = 2


class Feedback(namedtuple("Feedback", "query docs model weights")):
    """An RM3 expansion: the expanded ``WeightedQuery``, the feedback documents ``[(id, score)]``, the relevance
    model ``{term: rm(t)}`` (after the cut, summing to 1) and the interpolated weights ``{term: w(t)}``."""

    __slots__ = ()

    def to_dict(self) -> dict:
        return {
            "method": "rm3",
            "feedback_docs": [pid for pid, _ in self.docs],
            "model": dict(sorted(self.model.items())),
            "weights": dict(sorted(self.weights.items())),
        }


def relevance_model(
    docs: list[tuple[str, float]],
    vectors: dict[str, Counter],
    fb_terms: int = FB_TERMS,
) -> dict[str, float]:
    """``rm(t) = sum_D tf(t, D) / |D| * s(D)`` over the feedback documents ``docs`` (``vectors``: each one's
    feedback-term counts), the ``fb_terms`` heaviest (ties by term), scaled to sum 1. Pure; no index."""
    model: dict[str, float] = {}
    for pid, score in docs:
        counts = vectors.get(pid) or Counter()
        length = sum(counts.values())
        if length == 0:
            continue
        for term in sorted(counts):
            model[term] = model.get(term, 0.0) + counts[term] / length * score
    kept = sorted(model.items(), key=lambda kv: (-kv[1], kv[0]))[:fb_terms]
    total = sum(value for _, value in kept)
    return {term: value / total for term, value in kept} if total > 0 else {}


def interpolate(qtf: dict[str, float], model: dict[str, float], original_weight: float) -> dict[str, float]:
    """``w(t) = original_weight * qtf(t) / sum(qtf) + (1 - original_weight) * rm(t)``, over both vocabularies."""
    total = sum(qtf.values())
    out: dict[str, float] = {}
    for term in sorted(set(qtf) | set(model)):
        q = qtf.get(term, 0.0) / total if total > 0 else 0.0
        out[term] = original_weight * q + (1.0 - original_weight) * model.get(term, 0.0)
    return out


def weighted(snap: Snapshot, query: Query, weights: dict[str, float]) -> WeightedQuery:
    """A ``WeightedQuery`` of ``weights`` (``{term: w}``) on ``snap``: term ``t`` weighs ``w * idf(t)``, the
    terms the index does not have are left out; ``query`` is the original (its text and analyser are kept)."""
    stats = snap.stats
    terms = [t for t, w in weights.items() if w > 0]
    listed = json.dumps(sorted(terms), ensure_ascii=False)
    rows = lexical.terms_of(snap, listed, "prf: the expanded query's terms")
    qterms = tuple(
        lexical.query_term(stats, term, term_id, df, weights[term], max_tf) for term, term_id, df, max_tf in rows
    )
    expanded = Query(query.text, tuple(sorted(t.term for t in qterms)), stats.analyser, query.stopped)
    return WeightedQuery(expanded, qterms, stats)


def feedback_vectors(snap: Snapshot, paper_ids: list[str]) -> tuple[dict[str, Counter], dict[str, int]]:
    """Each paper's term counts (title and abstract, analysed as the index does) and the df of every term."""
    analyser = snap.stats.analyser
    rows = snap.rows("prf: the feedback documents' texts", PAPERS_SQL, {"paper_ids": json.dumps(paper_ids)})
    counts = {pid: Counter(analyser.analyse(f"{title} {abstract}")) for pid, title, abstract, _, _ in rows}
    vocabulary = sorted({t for c in counts.values() for t in c})
    listed = json.dumps(vocabulary, ensure_ascii=False)
    df = {term: d for term, _, d, _ in lexical.terms_of(snap, listed, "prf: the feedback terms' df")}
    return counts, df


def rm3(
    snap: Snapshot,
    wq: WeightedQuery,
    fb_docs: int = FB_DOCS,
    fb_terms: int = FB_TERMS,
    original_weight: float = ORIGINAL_WEIGHT,
    allowed: Passing | None = None,
) -> Feedback:
    """RM3 of ``wq`` on ``snap`` (see the module's docstring). A query with no term in the index, or whose
    feedback documents have no feedback term, comes back with its own weights (``model`` empty). ``allowed``
    (``retrieval.search.filters.Passing``): the feedback documents are the best papers that pass."""
    qtf = {t.term: float(t.qtf) for t in wq.terms}
    if not wq.terms:
        return Feedback(wq, [], {}, {})
    docs = top(snap, wq, fb_docs, allowed)
    counts, df = feedback_vectors(snap, [pid for pid, _ in docs])
    most = MAX_DF_RATIO * snap.stats.n_papers
    keep = {t for t, d in df.items() if d <= most and len(t) >= MIN_TERM_CHARS}
    vectors = {pid: Counter({t: n for t, n in c.items() if t in keep}) for pid, c in counts.items()}
    model = relevance_model(docs, vectors, fb_terms)
    weights = interpolate(qtf, model, original_weight)
    return Feedback(weighted(snap, wq.query, weights), docs, model, weights)


def top(snap: Snapshot, wq: WeightedQuery, k: int, allowed: Passing | None = None) -> list[tuple[str, float]]:
    """The exact BM25 top ``k`` of ``wq`` (among the papers ``allowed`` lets pass, when given)."""
    if allowed is not None:
        return lexical.filtered_top_papers(snap, wq, k, allowed)[0]
    return lexical.top_papers(snap, wq, k)[0]


def expand_query(snap: Snapshot, wq: WeightedQuery, method: str) -> WeightedQuery:
    """``wq`` expanded by ``method`` (``retrieval.config.PRF_METHODS``): itself for ``"none"``."""
    return wq if method == "none" else rm3(snap, wq).query
