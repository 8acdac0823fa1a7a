"""Stage 3, edge support: how well the cited paper's claims support the citing paper's claims.

**Claims.** A paper's claims are the first ``max_claims`` (3) sentences of its abstract (``retrieval.text.sentences``),
the lead a reader sees; a paper without an abstract has its title as its one claim, and a paper with neither has
none.

**Support.** For an edge u -> v (u cites v), a scorer fills the support matrix ``M[i][j]`` in [0, 1]: how well v's
claim j supports u's claim i; u's claim i is *covered* when its best support ``b_i = max_j M[i][j]`` reaches
``theta``. The coverage affinity ``Delta(u, v)`` (0 when either paper has no claim) is, under

- ``coverage="soft"`` (the default): ``floor + (1 - floor) * mean_i min(1, b_i / theta)``, a ramp instead of a
  step, so Delta grows with every bit of support up to theta and an edge between unrelated claims (every b_i 0)
  gets the floor (0.05): low, not zero. Pruning at tau above the floor then removes edges that weigh something
  unpruned, and changes the ranking;
- ``coverage="hard"`` (the earlier rule): the share of u's claims that are covered. Unrelated claims get exactly
  0, so a pruned edge (Delta below tau <= 1/3) weighed 0 anyway and pruning changed nothing but the audit trail.

Every pair of claims is one scorer call, so the calls of a run are exactly
``sum over E of |claims(u)| * |claims(v)|``, the bound announced with the graph's size; the run checks it.

**Scorers.** Anything with the ``SupportScorer`` shape: a ``name``, ``prepare(claims)`` (called once with every
claim of the graph, so a model can batch or a lexical scorer can load statistics) and ``support(hypotheses,
premises)`` returning the ``len(hypotheses) x len(premises)`` matrix. An entailment model (premise: v's claim,
hypothesis: u's claim, score: P(entailment)) or a language model asked for a probability fits as it is.

The shipped scorer, ``TfidfCosineScorer``, is deterministic and offline: the cosine of two claims' TF-IDF vectors,
with tf = 1 + ln(count) and the index's own idf, ``ln(1 + (N - df + 0.5) / (df + 0.5))`` from ``doc_freq`` (the
BM25 idf, so frequent words such as "the" weigh almost nothing and no stop-word list is needed). It also scores
every edge of a graph at once (``TfidfCosineScorer.best_supports``, in NumPy: what an evaluation's evidence modes
spend most of their time on), and ``support``, pair by pair in plain Python, is the reference it is tested against.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..bm25 import idf as bm25_idf
from ..errors import InputError
from ..store.sql.dialect import statement
from ..store.sql.executor import Snapshot
from ..text import sentences

DOC_FREQ_SQL = statement(
    lambda d: (
        f"""\
SELECT d.term,
       d.df
FROM doc_freq AS d
WHERE d.term {d.any_of("terms")}"""
    )
)


def claims_of(title: str, abstract: str | None, max_claims: int) -> list[str]:
    """The first ``max_claims`` abstract sentences; the title when there is no abstract; else nothing."""
    found = sentences(abstract or "", max_claims)
    if found:
        return found
    return [title.strip()] if title and title.strip() else []


@runtime_checkable
class SupportScorer(Protocol):
    """Scores how well premises (the cited paper's claims) support hypotheses (the citing paper's claims)."""

    name: str

    def prepare(self, claims: Sequence[str]) -> None:
        """Called once per run with every claim of the graph, before any ``support`` call."""
        ...

    def support(self, hypotheses: Sequence[str], premises: Sequence[str]) -> Sequence[Sequence[float]]:
        """``M[i][j]`` in [0, 1]: how well ``premises[j]`` supports ``hypotheses[i]``."""
        ...


class TfidfCosineScorer:
    """Cosine similarity of TF-IDF vectors (tf = 1 + ln count, idf from the index's ``doc_freq``), over the terms
    of the index's own analysis (its stemmer and stop words), so that every term is one ``doc_freq`` knows."""

    name = "tfidf-cosine"

    def __init__(self, snap: Snapshot) -> None:
        self._snap = snap
        self._n = snap.stats.n_papers
        self._analyse = snap.stats.analyser.analyse
        self._idf: dict[str, float] = {}
        self._vectors: dict[str, dict[str, float]] = {}

    def prepare(self, claims: Sequence[str]) -> None:
        # One query for the document frequencies of every new term of the run.
        tokens = {text: self._analyse(text) for text in claims if text not in self._vectors}
        missing = sorted({t for toks in tokens.values() for t in toks} - self._idf.keys())
        if missing:
            df = dict(
                self._snap.rows(
                    "evidence: document frequencies of the claims", DOC_FREQ_SQL, {"terms": json.dumps(missing)}
                )
            )
            for term in missing:
                self._idf[term] = self._idf_of(df.get(term, 0))
        for text, toks in tokens.items():
            self._vectors[text] = self._vector(toks)

    def _idf_of(self, df: int) -> float:
        return bm25_idf(self._n, df)

    def _vector(self, tokens: list[str]) -> dict[str, float]:
        weights = {}
        for term, count in Counter(tokens).items():
            idf = self._idf.get(term)
            if idf is None:  # a claim ``prepare`` did not see: a term outside the index has df 0
                idf = self._idf[term] = self._idf_of(0)
            weights[term] = (1.0 + math.log(count)) * idf
        norm = math.sqrt(sum(w * w for w in weights.values()))
        return {term: w / norm for term, w in weights.items()} if norm > 0 else {}

    def vector(self, text: str) -> dict[str, float]:
        """The unit TF-IDF vector of ``text`` (empty when it has no token)."""
        found = self._vectors.get(text)
        if found is None:
            found = self._vectors[text] = self._vector(self._analyse(text))
        return found

    def best_supports(
        self, edges: Sequence[tuple[str, str]], claims: dict[str, list[str]]
    ) -> dict[tuple[str, str], tuple[tuple[float, ...], int]]:
        """``best_supports`` for every edge at once, in NumPy: per citing paper u, its claims' vectors over u's own
        terms, and every premise of every paper u cites scored against them in one pass (a premise's terms that u
        lacks add nothing). The same values as ``support`` (its plain-Python reference), but for the order of
        the additions (tested to 1e-12)."""
        import numpy as np

        texts = sorted({text for u, v in edges for text in (*claims[u], *claims[v])})
        index = {text: i for i, text in enumerate(texts)}
        vocabulary: dict[str, int] = {}
        starts, terms, weights = [0], [], []
        for text in texts:
            for term, weight in self.vector(text).items():
                terms.append(vocabulary.setdefault(term, len(vocabulary)))
                weights.append(weight)
            starts.append(len(terms))
        term_of = np.array(terms, dtype=np.int64)
        weight_of = np.array(weights, dtype=np.float64)
        local = np.full(len(vocabulary) + 1, -1, dtype=np.int64)  # a term's column among u's terms, else -1
        by_citing: dict[str, list[str]] = {}
        for u, v in edges:
            by_citing.setdefault(u, []).append(v)
        out: dict[tuple[str, str], tuple[tuple[float, ...], int]] = {}
        for u, cited in by_citing.items():
            hypotheses = [index[text] for text in claims[u]]
            scored = [v for v in cited if hypotheses and claims[v]]
            for v in cited:  # no claim on either side: 0 per claim of u (the scored edges are overwritten)
                out[(u, v)] = (tuple(0.0 for _ in hypotheses), len(claims[v]))
            if not scored:
                continue
            # u's claims as dense rows over u's own terms.
            spans = [range(starts[h], starts[h + 1]) for h in hypotheses]
            own = np.unique(term_of[[i for span in spans for i in span]]).astype(np.int64)
            local[own] = np.arange(len(own))
            rows = np.zeros((len(hypotheses), len(own) + 1))  # a last, zero column for the terms u lacks
            for row, span in enumerate(spans):
                rows[row, local[term_of[span.start : span.stop]]] = weight_of[span.start : span.stop]
            # Every premise of every cited paper, its entries in one array, each tagged with its premise.
            premises = [index[text] for v in scored for text in claims[v]]
            lengths = np.array([starts[p + 1] - starts[p] for p in premises], dtype=np.int64)
            entries = np.concatenate([np.arange(starts[p], starts[p + 1]) for p in premises])
            tags = np.repeat(np.arange(len(premises)), lengths)
            columns = local[term_of[entries]]
            columns[columns < 0] = len(own)
            products = rows[:, columns] * weight_of[entries]
            matrix = np.vstack([np.bincount(tags, weights=row, minlength=len(premises)) for row in products])
            matrix = matrix.astype(np.float64, copy=False)  # (a bincount of nothing counts in integers)
            np.minimum(matrix, 1.0, out=matrix)
            local[own] = -1
            at = 0
            for v in scored:
                n = len(claims[v])
                out[(u, v)] = (tuple(matrix[:, at : at + n].max(axis=1).tolist()), n)
                at += n
        return {edge: out[edge] for edge in edges}

    def support(self, hypotheses: Sequence[str], premises: Sequence[str]) -> list[list[float]]:
        premise_vectors = [self.vector(p) for p in premises]
        matrix = []
        for h in hypotheses:
            hv = self.vector(h)
            row = []
            for pv in premise_vectors:
                # Only shared terms contribute; the key intersection runs in C.
                row.append(min(1.0, sum(hv[t] * pv[t] for t in hv.keys() & pv.keys())))
            matrix.append(row)
        return matrix


class CountingScorer:
    """Wraps a scorer, checks each matrix it returns, and counts the claim pairs it was asked to score."""

    def __init__(self, scorer: SupportScorer) -> None:
        self.scorer = scorer
        self.name = scorer.name
        self.calls = 0

    def prepare(self, claims: Sequence[str]) -> None:
        self.scorer.prepare(claims)

    def support(self, hypotheses: Sequence[str], premises: Sequence[str]) -> list[list[float]]:
        self.calls += len(hypotheses) * len(premises)
        matrix = [list(row) for row in self.scorer.support(hypotheses, premises)]
        if len(matrix) != len(hypotheses) or any(len(row) != len(premises) for row in matrix):
            raise InputError(
                f"the scorer {self.name!r} returned a matrix of the wrong shape for {len(hypotheses)} x "
                f"{len(premises)} claims: return one row per hypothesis and one column per premise"
            )
        if any(not (0.0 <= value <= 1.0) for row in matrix for value in row):
            raise InputError(f"the scorer {self.name!r} returned a support outside [0, 1]: rescale its scores")
        return matrix


@dataclass(frozen=True)
class EdgeSupport:
    """The support of one edge u -> v: u's claims' best support by v's claims, and the coverage Delta."""

    best: tuple[float, ...]  # one per claim of u
    premises: int  # claims of v
    delta: float
    theta: float = 0.0  # the support a claim needs to count as covered (``covered``)

    @property
    def covered(self) -> int:
        """u's claims whose best support reaches theta (under the hard rule, ``delta * len(best)``)."""
        return sum(1 for value in self.best if value >= self.theta)


def scorer_bound(edges: Sequence[tuple[str, str]], claims: dict[str, list[str]]) -> int:
    """The scorer calls a run will make: ``sum over edges u -> v of |claims(u)| * |claims(v)|``."""
    return sum(len(claims[u]) * len(claims[v]) for u, v in edges)


def coverage_delta(best: Sequence[float], theta: float, coverage: str = "soft", floor: float = 0.0) -> float:
    """Delta from u's claims' best supports ``best`` (see the module docstring): the share reaching ``theta``
    (``"hard"``), or ``floor + (1 - floor) * mean(min(1, best_i / theta))`` (``"soft"``; theta 0 counts every
    claim as covered). 0 when u has no claim."""
    if not best:
        return 0.0
    if coverage == "hard":
        return sum(1 for value in best if value >= theta) / len(best)
    ramp = [1.0 if theta <= 0.0 else min(1.0, value / theta) for value in best]
    return floor + (1.0 - floor) * (sum(ramp) / len(ramp))


def best_supports(
    edges: Sequence[tuple[str, str]], claims: dict[str, list[str]], scorer: CountingScorer
) -> dict[tuple[str, str], tuple[tuple[float, ...], int]]:
    """Per edge u -> v, in the order given: u's claims' best support by v's claims (``max_j M[i][j]``), and
    v's number of claims. An edge one of whose papers has no claim is not scored: 0 per claim of u."""
    batch = getattr(scorer.scorer, "best_supports", None)
    if batch is not None:  # the shipped scorer, every edge at once
        scorer.calls += sum(len(claims[u]) * len(claims[v]) for u, v in edges if claims[u] and claims[v])
        return batch(edges, claims)
    out = {}
    for u, v in edges:
        hypotheses, premises = claims[u], claims[v]
        if not hypotheses or not premises:
            out[(u, v)] = (tuple(0.0 for _ in hypotheses), len(premises))
            continue
        matrix = scorer.support(hypotheses, premises)
        out[(u, v)] = (tuple(max(row) for row in matrix), len(premises))
    return out


def edge_supports(
    best: dict[tuple[str, str], tuple[tuple[float, ...], int]],
    theta: float,
    coverage: str = "hard",
    floor: float = 0.0,
) -> dict[tuple[str, str], EdgeSupport]:
    """``EdgeSupport`` of every edge from its best supports (``best_supports``) under the coverage rule. An edge
    one of whose papers has no claim has Delta 0 under either rule (no evidence, not weak evidence)."""
    out = {}
    for key, (values, premises) in best.items():
        delta = coverage_delta(values, theta, coverage, floor) if values and premises else 0.0
        out[key] = EdgeSupport(values, premises, delta, theta)
    return out


def score_edges(
    edges: Sequence[tuple[str, str]],
    claims: dict[str, list[str]],
    scorer: CountingScorer,
    theta: float,
    coverage: str = "hard",
    floor: float = 0.0,
) -> dict[tuple[str, str], EdgeSupport]:
    """``EdgeSupport`` of every edge (see the module docstring), in the order given."""
    return edge_supports(best_supports(edges, claims, scorer), theta, coverage, floor)
