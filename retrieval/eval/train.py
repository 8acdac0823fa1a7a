"""Fitting the learned ranking (``retrieval.search.learned``): a judged query's features, the fit, its
cross-validation and the model file, for ``retrieval train`` on judged queries (``retrieval.eval.judged``) and on an
index's own citations (``retrieval.eval.own``).

Data. For each judged query, the BM25 list is computed as the evaluation computes it (``retrieval.eval.lexical``)
and every candidate of the learned ranking gets its features, by the very search path a learned search takes
(``RetrievalClient.rank`` under ``ranking="learned"``; ``query_features``).

Model. Linear, fitted by coordinate ascent on mean nDCG@10 (Metzler & Croft, "Linear feature-based models for
information retrieval", Inf. Retr. 10, 2007): the features are divided by their standard deviation over the
training candidates (``scales``); starting from the shipped hand-weighted policy (bm25_norm 1, evidence along
references and citing 0.5 each, recency 0.05; see ``STARTS``), each round tries, feature by feature in a fixed
order, the current weight plus each step of ``STEPS`` (and 0) and keeps the best (a strict gain of more than
1e-9, else the current weight), then divides the weights by their L1 norm (the ranking does not change); at most
``ROUNDS`` (6) rounds, stopping at a round without gain. Coordinate ascent finds a local optimum, so it runs from
each of ``STARTS`` (the policy's weights, the same following references only, and the seeds' vote alone) and keeps
the best fit.
Ties in a ranking go to the smaller paper id, as at search time. Deterministic: the same data gives the same
weights, bit for bit.

Cross-validation. With several sets, hold one set out: fit on the others, measure on it (the honest figure);
with one set, ``K_FOLDS``-fold over its queries (sorted by qid, query i in fold i mod k). The model written is
fitted on every query given, and the file records the cross-validated figures, the per-fold weights, the
training sets' names and sha256, and the candidate settings.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import __version__
from ..config import RetrievalConfig
from ..errors import ConfigError
from ..search import cutoff
from ..search.client import RetrievalClient
from ..search.learned import (
    BASE_FEATURES,
    DEFAULT_CANDIDATES,
    FEATURES,
    MODEL_FORMAT,
    MODEL_VERSION,
    SCALE_RANGE,
    RankerModel,
    derived_values,
    linked_share,
)
from ..search.query import Query
from ..workers import context, follow_parent
from .lexical import LEXICAL_DEPTH, bm25_list

#: Coordinate ascent: the steps tried around each weight, the most rounds, the folds of a single set.
STEPS = (-1.0, -0.3, -0.1, -0.03, -0.01, 0.01, 0.03, 0.1, 0.3, 1.0)
ROUNDS = 6
K_FOLDS = 5
CUTOFF = 10
#: The starting points, in raw feature units: the shipped hand-weighted policy, the same following references only
#: (``rel-references``, the best hand-weighted mode on hepth and ml-arxiv), and the seeds' vote alone (what
#: ``retrieval explain`` ranks by). ``START`` is the first.
STARTS = (
    {"bm25_norm": 1.0, "ev_references": 0.5, "ev_citing": 0.5, "recency": 0.05},
    {"bm25_norm": 1.0, "ev_references": 0.5, "recency": 0.05},
    {"vote": 1.0},
)
START = STARTS[0]
Progress = Callable[[str, int, int], None]


@dataclass
class QueryData:
    """One judged query's candidates: ids (sorted), their features (rows in id order), which are relevant, and
    how many relevant papers the query has in all (the ideal DCG's)."""

    qid: str
    ids: list[str]
    x: np.ndarray
    relevant: np.ndarray
    n_relevant: int
    ideal: float = field(init=False)

    def __post_init__(self) -> None:
        self.ideal = sum(1.0 / math.log2(i + 2) for i in range(min(self.n_relevant, CUTOFF)))


@dataclass
class SetData:
    """The judged queries of one set, with the name and sha256 of its two files."""

    name: str
    queries: list[QueryData]
    inputs: dict


def ndcg(q: QueryData, scores: np.ndarray, cutoff: int = CUTOFF) -> float:
    """nDCG@cutoff (binary gains, 1/log2(rank+1)) of ranking ``q``'s candidates by ``scores``, ties by id."""
    if q.ideal == 0.0 or len(scores) == 0:
        return 0.0
    rounded = np.round(scores, 10)
    order = np.argsort(-rounded, kind="stable")[:cutoff]  # ids are sorted: a stable sort breaks ties by id
    gains = q.relevant[order]
    return float(np.sum(gains / np.log2(np.arange(2, len(order) + 2)))) / q.ideal


def ndcg_rows(q: QueryData, scores: np.ndarray, cutoff: int = CUTOFF) -> np.ndarray:
    """``ndcg`` of each row of ``scores`` (rankings of ``q``'s candidates), in one sort: the same values."""
    if q.ideal == 0.0 or scores.shape[1] == 0:
        return np.zeros(scores.shape[0])
    order = np.argsort(-np.round(scores, 10), axis=1, kind="stable")[:, :cutoff]
    return (q.relevant[order] / np.log2(np.arange(2, order.shape[1] + 2))).sum(axis=1) / q.ideal


def mean_ndcg(queries: Sequence[QueryData], weights: np.ndarray) -> float:
    if not queries:
        return 0.0
    return sum(ndcg(q, q.x @ weights) for q in queries) / len(queries)


def scales_of(queries: Sequence[QueryData]) -> np.ndarray:
    """Each feature's standard deviation over every candidate of ``queries`` (1 where it is about 0: below the
    smallest scale a model file may hold)."""
    rows = [q.x for q in queries if len(q.x)]
    if not rows:
        return np.ones(len(FEATURES))
    sd = np.concatenate(rows).std(axis=0)
    return np.where(sd >= SCALE_RANGE[0], np.minimum(sd, SCALE_RANGE[1]), 1.0)


def coordinate_ascent(
    queries: Sequence[QueryData], start: np.ndarray, rounds: int = ROUNDS, steps: Sequence[float] = STEPS
) -> tuple[np.ndarray, list[float]]:
    """Weights (over features already divided by their scales) maximising mean nDCG@10 on ``queries``, and the
    objective after each round (the first entry: at ``start``). See the module docstring."""
    w = np.array(start, dtype=float)
    if np.abs(w).sum() > 0:
        w = w / np.abs(w).sum()
    best = mean_ndcg(queries, w)
    history = [best]
    base = [q.x @ w for q in queries]
    for _ in range(rounds):
        gained = False
        for i in range(len(w)):
            column = [q.x[:, i] for q in queries]
            tried = [v for v in sorted({round(w[i] + s, 12) for s in steps} | {0.0}) if v - w[i] != 0]
            deltas = np.array([value - w[i] for value in tried])
            totals = np.zeros(len(tried))
            for q, b, c in zip(queries, base, column, strict=True):  # every tried value of a query at once
                totals += ndcg_rows(q, b[None, :] + deltas[:, None] * c[None, :])
            totals /= max(1, len(queries))
            choice, choice_value = w[i], best
            for value, total in zip(tried, totals.tolist(), strict=True):
                if total > choice_value + 1e-9:
                    choice, choice_value = value, total
            if choice != w[i]:
                delta = choice - w[i]
                base = [b + delta * c for b, c in zip(base, column, strict=True)]
                w[i] = choice
                best = choice_value
                gained = True
        norm = np.abs(w).sum()
        if norm > 0:
            w = w / norm
            base = [b / norm for b in base]
        history.append(best)
        if not gained:
            break
    return w, history


def fit(queries: Sequence[QueryData], rounds: int = ROUNDS) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Scales, raw-unit weights (``weight / scale`` multiplies the raw feature) and the objective's history."""
    scales, scaled = _scaled(queries)
    return scales, *_best([_ascent(scaled, scales, point, rounds) for point in STARTS])


def _scaled(queries: Sequence[QueryData]) -> tuple[np.ndarray, list[QueryData]]:
    """The features' scales over ``queries`` (``scales_of``), and the queries with their features divided by them."""
    scales = scales_of(queries)
    return scales, [QueryData(q.qid, q.ids, q.x / scales, q.relevant, q.n_relevant) for q in queries]


def _ascent(scaled: Sequence[QueryData], scales: np.ndarray, point: dict, rounds: int) -> tuple:
    """Coordinate ascent over ``scaled`` from the start ``point``."""
    return coordinate_ascent(scaled, np.array([point.get(f, 0.0) * scales[i] for i, f in enumerate(FEATURES)]), rounds)


def _best(ascents: Sequence[tuple]) -> tuple:
    """The (weights, history) of ``ascents`` (one per start, in ``STARTS``' order) with the best final objective;
    a tie goes to the earlier start."""
    best = None
    for w, history in ascents:
        if best is None or history[-1] > best[1][-1] + 1e-12:
            best = (w, history)
    return best


def _at_start(queries: Sequence[QueryData], scales: np.ndarray) -> float:
    """Mean nDCG@10 of ``queries`` under the policy's weights (``START``)."""
    start = np.array([START.get(f, 0.0) for f in FEATURES])  # raw units: weight / scale cancels the scale
    return mean_ndcg(queries, start)


# -- data ---------------------------------------------------------------------------------------------------


def _extraction_model(candidates: dict = DEFAULT_CANDIDATES) -> RankerModel:
    """A model with every feature and zero weights: its entries carry the features, the order is by id."""
    return RankerModel(FEATURES, [0.0] * len(FEATURES), [1.0] * len(FEATURES), name="features",
                       candidates=candidates)  # fmt: skip


def extraction_config(candidates: dict = DEFAULT_CANDIDATES) -> tuple[RetrievalConfig, int]:
    """The setting a feature extraction searches with (a model of every feature, zero weights) and its BM25
    list's depth."""
    cfg = RetrievalConfig(ranking="learned", model=_extraction_model(candidates))
    return cfg, max(LEXICAL_DEPTH, candidates["lexical_depth"])


def query_features(
    client: RetrievalClient,
    cfg: RetrievalConfig,
    parsed: Query,
    depth: int,
    exclusion: cutoff.Exclusion | None,
    qid: str,
    relevant: Collection[str],
) -> QueryData:
    """One judged query's candidates and features, by the path a learned search takes, leaving ``exclusion``
    out (``None``: nothing)."""
    hits = bm25_list(client, parsed, depth, exclusion)
    result = client.rank(parsed, hits, cfg, limit=None, full=False, exclude=exclusion)
    entries = sorted(result.ranked, key=lambda e: e.paper.id)
    ids = [e.paper.id for e in entries]
    x = np.array([[e.features[f] for f in BASE_FEATURES] for e in entries], dtype=float)
    x = x.reshape(-1, len(BASE_FEATURES))
    rel = np.array([pid in relevant for pid in ids], dtype=float)
    return QueryData(qid, ids, x, rel, len(relevant))


def with_derived(q: QueryData) -> QueryData:
    """``q`` with its rows over ``BASE_FEATURES`` (as cached) completed to ``FEATURES``: the derived features
    computed by the search's own ``linked_share`` and ``derived_values``."""
    if q.x.shape[1] == len(FEATURES):
        return q
    rows = [dict(zip(BASE_FEATURES, map(float, row), strict=True)) for row in q.x]
    linked = linked_share(rows)
    extra = [[derived_values(v, linked)[f] for f in FEATURES[len(BASE_FEATURES) :]] for v in rows]
    x = np.hstack([q.x, np.array(extra, dtype=float).reshape(len(rows), len(FEATURES) - len(BASE_FEATURES))])
    return QueryData(q.qid, q.ids, x, q.relevant, q.n_relevant)


# -- cross-validation and the model file ----------------------------------------------------------------------


def _model(
    scales: np.ndarray, weights: np.ndarray, name: str, meta: dict | None = None, candidates: dict = DEFAULT_CANDIDATES
) -> RankerModel:
    return RankerModel(FEATURES, [float(w) for w in weights], [float(s) for s in scales], name=name,
                       candidates=candidates, meta=meta)  # fmt: skip


def by_corpus(sets: Sequence[SetData]) -> list[list[SetData]]:
    """The sets grouped by the sha256 of their corpus, in order of first appearance: the query sets of one corpus
    (its abstracts and its titles) ask for the same papers, so they are held out together. Sets from no corpus
    file (an index's own citations, ``retrieval.eval.own``) are one group."""
    groups: dict[str, list[SetData]] = {}
    for s in sets:
        groups.setdefault(s.inputs.get("corpus", {}).get("sha256"), []).append(s)
    return list(groups.values())


def cross_validate(sets: Sequence[SetData], rounds: int = ROUNDS, jobs: int = 1) -> dict:
    """Hold one corpus out (sets of several corpora; ``by_corpus``) or k-fold over the queries (one corpus; a
    query's every form in the same fold): per fold the weights, the queries trained and tested on, the training
    objective and the held-out nDCG@10 (with the policy's start for comparison), and per held-out set its own
    figure. ``jobs`` worker processes share the folds' fits (``fit_many``)."""
    kind, splits = _splits(sets)
    return _summary(kind, splits, fit_many([train for _, train, *_ in splits], rounds, jobs))


def _splits(sets: Sequence[SetData]) -> tuple[str, list[tuple]]:
    """The cross-validation's kind and its folds: (name, training queries, held-out queries, the held-out
    corpus's inputs, the held-out sets)."""
    groups = by_corpus(sets)
    if len(groups) > 1:
        splits = [
            ("+".join(s.name for s in group), [q for o in sets if o not in group for q in o.queries],
             [q for s in group for q in s.queries], group[0].inputs, group)
            for group in groups
        ]  # fmt: skip
        return "hold-one-corpus-out", splits
    every = [q for s in sets for q in s.queries]
    qids = sorted({q.qid for q in every})  # a query asked twice (title, abstract) stays in one fold
    if len(qids) < K_FOLDS:
        raise ConfigError(f"{len(qids)} judged queries are too few to cross-validate: give at least {K_FOLDS}")
    fold_of = {qid: i % K_FOLDS for i, qid in enumerate(qids)}
    splits = [
        (f"fold {k + 1}/{K_FOLDS}", [q for q in every if fold_of[q.qid] != k],
         [q for q in every if fold_of[q.qid] == k], None, [])
        for k in range(K_FOLDS)
    ]  # fmt: skip
    return f"{K_FOLDS}-fold over queries", splits


def _summary(kind: str, splits: list[tuple], fitted: list[tuple]) -> dict:
    """``cross_validate``'s record of the folds ``splits`` fitted as ``fitted`` (one fit per fold, in order)."""
    folds = []
    for (name, train, test, inputs, group), (scales, w, history) in zip(splits, fitted, strict=True):
        scaled_test = [QueryData(q.qid, q.ids, q.x / scales, q.relevant, q.n_relevant) for q in test]
        per_set = {}
        if len(group) > 1:
            for held in group:
                scaled = [QueryData(q.qid, q.ids, q.x / scales, q.relevant, q.n_relevant) for q in held.queries]
                per_set[held.name] = round(mean_ndcg(scaled, w), 6)
        start = np.array([START.get(f, 0.0) * scales[i] for i, f in enumerate(FEATURES)])
        folds.append({
            "held_out": name,
            **({"held_out_inputs": inputs} if inputs else {}),
            "train_queries": len(train),
            "test_queries": len(test),
            "train_ndcg@10": round(history[-1], 6),
            "train_ndcg@10_start": round(_at_start(train, scales), 6),
            "test_ndcg@10": round(mean_ndcg(scaled_test, w), 6),
            "test_ndcg@10_start": round(mean_ndcg(scaled_test, start), 6),
            **({"test_ndcg@10_per_set": per_set} if per_set else {}),
            "scales": [round(float(s), 12) for s in scales],
            "weights": [round(float(v), 12) for v in w],
        })  # fmt: skip
    tested = sum(f["test_queries"] for f in folds)
    return {
        "kind": kind,
        "folds": folds,
        # over every held-out query (each query once)
        "test_ndcg@10_mean": round(sum(f["test_ndcg@10"] * f["test_queries"] for f in folds) / tested, 6),
        "test_ndcg@10_start_mean": round(sum(f["test_ndcg@10_start"] * f["test_queries"] for f in folds) / tested, 6),
    }


#: In a worker process of ``fit_many``: the training sets its tasks name by position, and the rounds (inherited
#: from the parent by fork, not sent).
_FITS: tuple | None = None


def _ascent_task(task: tuple[int, int]) -> tuple:
    trainsets, rounds = _FITS
    scales, scaled = _scaled(trainsets[task[0]])
    return _ascent(scaled, scales, STARTS[task[1]], rounds)


def fit_many(trainsets: Sequence[Sequence[QueryData]], rounds: int = ROUNDS, jobs: int = 1) -> list[tuple]:
    """``fit`` of each of ``trainsets``, in order; ``jobs`` worker processes share the ascents (one per set and
    start) where processes start by fork (the sets are inherited, not copied through pipes). Each ascent is
    deterministic: the same results either way."""
    global _FITS
    if jobs <= 1 or context().get_start_method() != "fork":
        return [fit(train, rounds) for train in trainsets]
    tasks = [(i, k) for i in range(len(trainsets)) for k in range(len(STARTS))]
    _FITS = (trainsets, rounds)
    try:
        with context().Pool(min(jobs, len(tasks)), initializer=follow_parent, initargs=(os.getpid(),)) as pool:
            ascents = pool.map(_ascent_task, tasks, chunksize=1)
    finally:
        _FITS = None
    per_set = len(STARTS)
    return [(scales_of(train), *_best(ascents[i * per_set : (i + 1) * per_set])) for i, train in enumerate(trainsets)]


#: What a model file fitted without its folds says in their place.
NO_FOLDS = "fitted for an evaluation, which measures it on its own held-out queries"


def fit_and_save(
    sets: Sequence[SetData],
    out: str | os.PathLike[str],
    *,
    name: str,
    rounds: int = ROUNDS,
    candidates: dict = DEFAULT_CANDIDATES,
    fitted: dict | None = None,
    training: list[dict] | None = None,
    origin: dict | None = None,
    folds: bool = True,
    jobs: int = 1,
) -> dict:
    """Cross-validate on ``sets`` (unless ``folds`` is false), fit on every query of them, and write the model to
    ``out``; ``fitted`` adds to the file's record of the fit, ``training`` describes the training sets (default:
    their names and sizes), ``origin`` where judged queries came from when no file gave them
    (``retrieval.eval.own``), ``jobs`` worker processes share the fits (``fit_many``). Returns the summary
    ``retrieval train`` prints."""
    everything = [q for s in sets for q in s.queries]
    if folds:  # the folds' fits and the final one share the workers
        kind, splits = _splits(sets)
        fits = fit_many([train for _, train, *_ in splits] + [everything], rounds, jobs)
        cv = _summary(kind, splits, fits[:-1])
        scales, w, history = fits[-1]
    else:
        cv = {"not_run": NO_FOLDS}
        scales, w, history = fit_many([everything], rounds, jobs)[0]
    at_start = _at_start(everything, scales)
    meta = {
        "fitted": {
            "method": "coordinate ascent on mean nDCG@10 (Metzler & Croft 2007), features over their std, "
            "run from each start (the hand-weighted policy, the same following references only, the seeds' vote) "
            "and the best fit kept, L1-normalised weights",
            "rounds": rounds,
            "steps": list(STEPS),
            "train_ndcg@10": round(history[-1], 6),
            "train_ndcg@10_policy_weights": round(at_start, 6),
            "train_ndcg@10_history": [round(h, 6) for h in history],
            "retrieval_version": __version__,
            **(fitted or {}),
        },
        "training_sets": training or [{"name": s.name, "queries_used": len(s.queries)} for s in sets],
        **({"own_citations": origin} if origin else {}),
        "cross_validation": cv,
    }
    model = _model(scales, w, name, meta, candidates)
    digest = model.save(out)
    weights = dict(zip(FEATURES, model.weights, strict=True))
    return {"model": str(out), "sha256": digest, "name": name, "cross_validation": cv, "fitted": meta["fitted"],
            "training_sets": meta["training_sets"], "weights": weights,
            **({"own_citations": origin} if origin else {})}  # fmt: skip


def check_model_name(name: object) -> None:
    """A ``ConfigError`` unless ``name`` can name a model (a non-empty string without control characters)."""
    if not isinstance(name, str) or not name.strip() or any(ord(ch) < 32 for ch in name):
        raise ConfigError(f"--name {name!r}: give the model a name of letters, digits or punctuation, such as ranker")


def check_model_path(out: Path) -> None:
    """A ``ConfigError`` unless a model file can be written at ``out`` (a file in an existing folder)."""
    if out.is_dir():
        raise ConfigError(f"{out} is a folder: give the model's file, such as {out / 'ranker.json'}")
    if not out.parent.is_dir():
        raise ConfigError(f"there is no folder {out.parent} for the model file {out}: create it, or choose another")


__all__ = [
    "MODEL_FORMAT", "MODEL_VERSION", "ROUNDS", "QueryData", "SetData", "by_corpus", "check_model_name",
    "check_model_path", "coordinate_ascent", "cross_validate", "extraction_config", "fit", "fit_and_save", "mean_ndcg",
    "ndcg", "ndcg_rows", "query_features", "with_derived",
]  # fmt: skip
