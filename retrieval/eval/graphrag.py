"""The Graph-RAG article's two tables, measured on the evaluated queries.

**By hop.** Row 0 is the seed set (the BM25 top ``top_k_lexical``); row h is the blend mode that walks h hops.

- recall@10: of that row's ranking (row 0: the BM25 top 10), pooled (Crase) and macro.
- seeds in the top 10 (mean): how many of the ranking's first 10 papers are seeds. With the default weights a seed
  gets graph score 1.0 and a neighbour 0.6, so a neighbour outranks a seed only on a large recency advantage.
- candidate set (mean): papers within h hops of the seeds, i.e. the blend's ``hit_count`` (row 0: the seeds).
- new at hop h (mean): papers first reached at distance exactly h.
- precision of hop h (pooled): relevant papers among those first reached at hop h over all papers first reached
  at hop h, summed over queries; shown against the base rate ``mean |Rel| / N`` (N = papers in the evaluation
  index), the precision of a paper drawn at random, and as the ratio of the two.
- reach (pooled): share of all relevant papers that lie within h hops, whether or not ranked in the top 10.

**By seed quality.** Queries bucketed by how many relevant papers their seed set holds (0, 1-3, 4-7, 8+), with
the bucket's query count, its mean |Rel|, macro recall@10 (and @50) of the BM25 list and of each graph mode,
and the lift (mode minus BM25, in recall points).
"""

from __future__ import annotations

from collections.abc import Sequence

from .metrics import Effectiveness
from .modes import Mode
from .records import QueryRun

BUCKETS: tuple[tuple[str, int, int | None], ...] = (("0", 0, 0), ("1-3", 1, 3), ("4-7", 4, 7), ("8+", 8, None))
#: The seed-quality table's cutoffs: 10 as in the article, and 50, because with the default weights a blend's
#: top 10 is (nearly) always its seed set, so the graph's effect shows only further down.
SEED_TABLE_CUTOFFS = (10, 50)


def graph_modes(modes: Sequence[Mode]) -> list[Mode]:
    """The modes that walk the graph, by number of hops, then name."""
    return sorted((m for m in modes if m.hops is not None), key=lambda m: (m.hops, m.name))


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def by_hop(
    runs: Sequence[QueryRun],
    modes: Sequence[Mode],
    effect: dict[str, Effectiveness],
    lexical: Effectiveness,
    base_rate: float,
    top_k: int,
) -> list[dict]:
    """One row for the seeds and one per graph mode (see the module docstring)."""
    n = len(runs)
    total_relevant = sum(len(r.relevant) for r in runs)
    seeds = sum(len(r.seeds) for r in runs)
    relevant_seeds = sum(r.relevant_seeds for r in runs)
    precision = _ratio(relevant_seeds, seeds)
    rows = [
        {
            "hop": 0,
            "source": f"BM25 top {top_k} (the seeds)",
            "recall@10_pooled": lexical.pooled_recall[10],
            "recall@10_macro": lexical.means["recall@10"],
            "seeds_in_top10_mean": sum(len(set(r.seeds[:10])) for r in runs) / n,
            "candidates_mean": seeds / n,
            "new_papers_mean": seeds / n,
            "new_relevant_mean": relevant_seeds / n,
            "newest_hop_precision": precision,
            "precision_over_base_rate": _ratio(precision, base_rate) if precision is not None else None,
            "reach_pooled": _ratio(relevant_seeds, total_relevant),
        }
    ]
    for mode in graph_modes(modes):
        answers = [r.answers[mode.name] for r in runs]
        new = sum((a.hop_counts or {}).get(mode.hops, (0, 0))[0] for a in answers)
        new_relevant = sum((a.hop_counts or {}).get(mode.hops, (0, 0))[1] for a in answers)
        reached_relevant = sum(rel for a in answers for _, rel in (a.hop_counts or {}).values())
        precision = _ratio(new_relevant, new)
        rows.append(
            {
                "hop": mode.hops,
                "source": mode.name,
                "recall@10_pooled": effect[mode.name].pooled_recall[10],
                "recall@10_macro": effect[mode.name].means["recall@10"],
                "seeds_in_top10_mean": sum(len(set(r.answers[mode.name].ranking[:10]) & set(r.seeds)) for r in runs)
                / n,
                "candidates_mean": sum(a.candidates for a in answers) / n,
                "new_papers_mean": new / n,
                "new_relevant_mean": new_relevant / n,
                "newest_hop_precision": precision,
                "precision_over_base_rate": _ratio(precision, base_rate) if precision is not None else None,
                "reach_pooled": _ratio(reached_relevant, total_relevant),
            }
        )
    return rows


def bucket_of(relevant_seeds: int) -> str:
    """The label of the seed-quality bucket for a seed set holding ``relevant_seeds`` relevant papers."""
    for label, lo, hi in BUCKETS:
        if relevant_seeds >= lo and (hi is None or relevant_seeds <= hi):
            return label
    raise ValueError(relevant_seeds)  # pragma: no cover - the buckets cover every count >= 0


def by_seed_quality(
    runs: Sequence[QueryRun], modes: Sequence[Mode], effect: dict[str, Effectiveness], lexical: Effectiveness
) -> list[dict]:
    """One row per bucket: macro recall@K (K in ``SEED_TABLE_CUTOFFS``) of the BM25 list and of each graph mode,
    and the lift (None where the bucket is empty)."""
    rows = []
    for label, _, _ in BUCKETS:
        members = [r for r in runs if bucket_of(r.relevant_seeds) == label]
        count = len(members)

        def mean(e: Effectiveness, name: str, members: list[QueryRun] = members, count: int = count) -> float | None:
            return sum(e.per_query[r.qid][name] for r in members) / count if count else None

        base = {f"recall@{k}": mean(lexical, f"recall@{k}") for k in SEED_TABLE_CUTOFFS}
        row: dict = {
            "bucket": label,
            "queries": count,
            "mean_relevant": sum(len(r.relevant) for r in members) / count if count else None,
            "bm25": base,
            "with_graph": [],
        }
        for mode in graph_modes(modes):
            entry: dict = {"mode": mode.name, "hops": mode.hops}
            for k in SEED_TABLE_CUTOFFS:
                value = mean(effect[mode.name], f"recall@{k}")
                entry[f"recall@{k}"] = value
                entry[f"lift@{k}"] = None if value is None else value - base[f"recall@{k}"]
            row["with_graph"].append(entry)
        rows.append(row)
    return rows
