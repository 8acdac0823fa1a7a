"""Effectiveness measures of a run (one ranking per query) against binary relevance, and latency summaries.

Variants, for a query q with relevant set Rel(q) and ranking r(q), at cutoff K in ``CUTOFFS``:

- **pooled recall@K** (Crase): ``sum_q |Rel(q) ∩ top_K(q)| / sum_q |Rel(q)|``, one ratio over all queries, so a
  query with many relevant papers weighs more. Computed here: no maintained library offers it.
- **macro recall@K**: ``|Rel(q) ∩ top_K(q)| / |Rel(q)|``, averaged over queries (trec_eval ``recall_K``).
- **MAP@K** (Crase): ``AP@K(q) = (1/|Rel(q)|) * sum_{i<=K} Prec@i * rel_i``, averaged over queries. The
  denominator is |Rel(q)|, not min(K, |Rel(q)|): this is trec_eval's ``map_cut_K``.
- **nDCG@10**: binary gains, log2(rank + 1) discount, over the ideal ranking of Rel(q) (trec_eval ``ndcg_cut_10``).
- **MRR**: 1 / rank of the first relevant paper in the ranking (at most 100 long), 0 when none is there
  (trec_eval ``recip_rank``).

Macro recall, MAP, nDCG and MRR come from ir-measures with its pytrec_eval (trec_eval) provider, per query,
then are averaged here over *every* evaluated query, so a query with an empty ranking counts as 0. trec_eval
orders a run by score and breaks ties by document id, descending; to make it score exactly our order, each
ranking is handed over with the strictly decreasing scores ``len - i`` (the same scores the TREC run files hold).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import RetrievalError

CUTOFFS = (5, 10, 20, 50, 100)
NDCG_CUTOFF = 10

Rankings = Mapping[str, Sequence[str]]
Qrels = Mapping[str, frozenset[str] | set[str]]


def _library():
    try:
        import ir_measures
        import pytrec_eval  # noqa: F401  (the provider ir-measures is asked to use)
    except ImportError:  # pragma: no cover - depends on the environment
        raise RetrievalError(
            "the evaluation needs ir-measures and pytrec_eval: install them with `pip install 'retrieval[eval]'`"
        ) from None
    return ir_measures


def require_library() -> None:
    """Fail now, not after the queries have run, when the metrics library is missing."""
    _library()


def measure_names() -> list[str]:
    """The keys of ``library_measures``' per-query dicts, in report order."""
    return [f"recall@{k}" for k in CUTOFFS] + [f"map@{k}" for k in CUTOFFS] + [f"ndcg@{NDCG_CUTOFF}", "mrr"]


def rank_scores(ranking: Sequence[str]) -> dict[str, float]:
    """Strictly decreasing scores (``len - i``) that make a score-sorting evaluator keep ``ranking``'s order."""
    n = len(ranking)
    return {pid: float(n - i) for i, pid in enumerate(ranking)}


def library_measures(rankings: Rankings, qrels: Qrels) -> dict[str, dict[str, float]]:
    """Per query (every key of ``qrels``), the macro-averaged measures computed by ir-measures/pytrec_eval.

    Keys: ``recall@K`` and ``map@K`` for K in ``CUTOFFS``, ``ndcg@10``, ``mrr``. A query absent from
    ``rankings`` or with an empty ranking gets 0 for each.
    """
    irm = _library()
    names = {}
    for k in CUTOFFS:
        names[irm.R @ k] = f"recall@{k}"
        names[irm.AP @ k] = f"map@{k}"
    names[irm.nDCG @ NDCG_CUTOFF] = f"ndcg@{NDCG_CUTOFF}"
    names[irm.RR] = "mrr"
    lib_qrels = {qid: dict.fromkeys(sorted(rel), 1) for qid, rel in qrels.items()}
    lib_run = {qid: rank_scores(rankings[qid]) for qid in qrels if rankings.get(qid)}
    out = {qid: dict.fromkeys(names.values(), 0.0) for qid in qrels}
    if lib_run:
        for metric in irm.pytrec_eval.iter_calc(list(names), lib_qrels, lib_run):
            if metric.query_id in out:
                out[metric.query_id][names[metric.measure]] = float(metric.value)
    return out


def pooled_recall(rankings: Rankings, qrels: Qrels, k: int) -> float:
    """Crase's pooled recall@k: relevant papers found in the top k of all queries over all relevant papers."""
    found = sum(len(set(rankings.get(qid, ())[:k]) & set(rel)) for qid, rel in qrels.items())
    total = sum(len(rel) for rel in qrels.values())
    return found / total if total else 0.0


@dataclass(frozen=True)
class Effectiveness:
    """A run's measures: the per-query library values and the aggregates of the report."""

    per_query: dict[str, dict[str, float]]
    pooled_recall: dict[int, float]
    means: dict[str, float]

    def to_dict(self) -> dict:
        return {
            "pooled_recall": {f"@{k}": v for k, v in self.pooled_recall.items()},
            "recall": {f"@{k}": self.means[f"recall@{k}"] for k in CUTOFFS},
            "map": {f"@{k}": self.means[f"map@{k}"] for k in CUTOFFS},
            f"ndcg@{NDCG_CUTOFF}": self.means[f"ndcg@{NDCG_CUTOFF}"],
            "mrr": self.means["mrr"],
        }


def effectiveness(rankings: Rankings, qrels: Qrels) -> Effectiveness:
    """Every measure of the module docstring, for the queries of ``qrels`` (in its order)."""
    per_query = library_measures(rankings, qrels)
    n = len(per_query)
    means = {name: (sum(values[name] for values in per_query.values()) / n if n else 0.0) for name in measure_names()}
    pooled = {k: pooled_recall(rankings, qrels, k) for k in CUTOFFS}
    return Effectiveness(per_query, pooled, means)


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """Median, 95th percentile (linear interpolation between order statistics) and mean, in milliseconds."""
    if not seconds:
        return {"median_ms": 0.0, "p95_ms": 0.0, "mean_ms": 0.0}
    ms = sorted(s * 1000.0 for s in seconds)
    p95 = ms[0] if len(ms) == 1 else statistics.quantiles(ms, n=20, method="inclusive")[18]
    return {"median_ms": statistics.median(ms), "p95_ms": p95, "mean_ms": statistics.fmean(ms)}
