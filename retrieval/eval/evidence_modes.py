"""The evidence pipeline (``retrieval.evidence``) as evaluation modes, behind the ``Mode`` protocol of
``retrieval.eval.modes``. The evaluation imports the evidence package, never the reverse.

Each mode runs ``explain`` on the query with the shared BM25 list as sub-query 0's pool (no extra lexical pass),
and answers with:

- ranking: the evidence ranking (papers with a positive walk score, best first), then a backfill up to the
  evaluation's depth, which never reorders the walk's papers. The walk ranks a few dozen to a few hundred papers;
  the backfill keeps recall at deep cutoffs comparable with the other modes', and the description says so.
  ``backfill="graph+bm25"`` (default): first the rest of the evidence graph (papers the walk gave no mass, mostly
  those reached only through pruned edges), by the number of seeds they are linked to, then their place in the
  BM25 list, then id; then the rest of the BM25 list. ``"bm25"``: the BM25 list only. ``"none"``: no backfill.
- candidates: |V|, the papers of the evidence graph (the set every ranked paper comes from);
- distances: 0 for the seeds, 1 for every other paper of the graph (the 1.5-hop neighbourhood is one hop out).

Query-year recency needs the query's year. The runner's ``LexicalPass`` does not carry one yet; when it gains a
``year`` attribute (the citation-recommendation query paper's year) the modes use it. Until then, and for a query
without a year, they fall back to the corpus's latest year and count the fallback in ``costs``.

The modes (``evidence_modes``): the Crase walk's ablation, ``evidence-{ppr,salsa}[-noprune][-qyear]`` (PPR or
SALSA over ``w = Delta * age^-0.5`` with 10 seeds, under the soft coverage rule at tau 0.3: pruned against not,
corpus year against query year), ``evidence-ppr-hard`` (the same PPR under the earlier hard coverage, the walk as
first shipped), and the pipeline's default, the seeds' vote, ``evidence-vote``, with one change each:
``-noprune``, ``-nosplit`` (no sentence sub-queries), ``-delta`` (edges weighted by Delta), ``-hard`` (pruned by
the earlier hard coverage at tau 0.3), ``-recency`` and ``-recency-qyear`` (edges weighted by age^-0.5 from the
corpus's or the query's year).

Every mode also records the cost of each query in ``costs`` (|V|, |E|, scorer calls, milliseconds per stage, the
run's health): ``cost_summary()`` gives the means for a report.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..config import RetrievalConfig
from ..errors import ConfigError
from ..evidence.config import EvidenceConfig
from ..evidence.pipeline import explain
from ..evidence.records import EvidenceRun
from ..search.client import RetrievalClient
from .records import LexicalPass, ModeOutput


@dataclass
class EvidenceMode:
    """The evidence pipeline as an evaluation mode (see the module docstring)."""

    name: str
    description: str
    ranker: str = "ppr"
    prune: bool = True
    recency: str = "corpus"
    backfill: str = "graph+bm25"
    settings: EvidenceConfig = field(default_factory=EvidenceConfig)
    hops: int | None = 1
    costs: list[dict] = field(default_factory=list, repr=False, compare=False)

    def config_for(self, query: LexicalPass, depth: int) -> tuple[EvidenceConfig, bool]:
        """The run's settings, and whether a query-year mode had to fall back to the corpus's latest year."""
        year = getattr(query, "year", None)
        recency, fallback = self.recency, False
        if recency == "query-year" and year is None:
            recency, fallback = "corpus", True
        cfg = replace(
            self.settings,
            ranker=self.ranker,
            prune=self.prune,
            recency=recency,
            query_year=year if recency == "query-year" else None,
            top_k=depth,
        )
        return cfg, fallback

    def run(self, client: RetrievalClient, query: LexicalPass, config: RetrievalConfig, depth: int) -> ModeOutput:
        cfg, fallback = self.config_for(query, depth)
        run = explain(client, query.text, config=cfg, lexical=query.bm25, memo=query.memo)
        ranking = backfilled(run, query.bm25, depth, self.backfill)
        distances = {pid: 0 if node.seed is not None else 1 for pid, node in run.nodes.items()}
        self.costs.append(
            {
                "nodes": run.size.nodes,
                "edges": run.size.edges,
                "kept_edges": len(run.kept_edges),
                "scorer_calls": run.scorer_calls,
                "graph_ranked": len(run.ranking),
                "status": run.health.status,
                "query_year_fallback": fallback,
                **{f"{stage}_ms": ms for stage, ms in run.timings_ms.items()},
            }
        )
        costs = {
            "nodes": run.size.nodes,
            "edges": run.size.edges,
            "kept_edges": len(run.kept_edges),
            "scorer_calls": run.scorer_calls,
            "status": run.health.status,
        }
        return ModeOutput(ranking, run.size.nodes, distances, costs=costs)

    def cost_summary(self) -> dict:
        """Means of the numeric costs over the queries run so far, with the count of each health status."""
        if not self.costs:
            return {}
        numeric = [k for k, v in self.costs[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        summary: dict = {f"{key}_mean": sum(c[key] for c in self.costs) / len(self.costs) for key in numeric}
        summary["queries"] = len(self.costs)
        summary["query_year_fallbacks"] = sum(1 for c in self.costs if c["query_year_fallback"])
        statuses: dict[str, int] = {}
        for c in self.costs:
            statuses[c["status"]] = statuses.get(c["status"], 0) + 1
        summary["statuses"] = dict(sorted(statuses.items()))
        return summary


BACKFILLS = ("graph+bm25", "bm25", "none")


def backfilled(run: EvidenceRun, bm25: list[tuple[str, float]], depth: int, backfill: str) -> list[str]:
    """The run's ranking followed by the ``backfill`` of the module docstring, at most ``depth`` ids."""
    if backfill not in BACKFILLS:
        raise ConfigError(f"backfill must be one of {', '.join(BACKFILLS)}; got {backfill!r}")
    ranking = [pid for pid, _ in run.ranking[:depth]]
    seen = set(ranking)
    if backfill == "graph+bm25":
        place = {pid: i for i, (pid, _) in enumerate(bm25)}
        rest = [node for pid, node in run.nodes.items() if pid not in seen]
        rest.sort(key=lambda n: (-len({seed for seed, _ in n.links}), place.get(n.paper_id, len(place)), n.paper_id))
        ranking += [node.paper_id for node in rest[: depth - len(ranking)]]
        seen.update(ranking)
    if backfill != "none":
        ranking += [pid for pid, _ in bm25 if pid not in seen][: depth - len(ranking)]
    return ranking


#: The Crase walk's settings in the eight PPR/SALSA modes: the earlier defaults (10 seeds, no split, ``w = Delta *
#: age^-0.5``, tau 0.3) with the soft coverage of ``retrieval.evidence.support``, so that pruning removes edges
#: that weigh something unpruned. ``evidence-ppr-hard`` is the same walk under the earlier hard coverage.
CRASE_SOFT = EvidenceConfig.crase(coverage="soft", support_floor=EvidenceConfig().support_floor)


def _describe(ranker: str, prune: bool, recency: str) -> str:
    walk = "personalised PageRank" if ranker == "ppr" else "personalised SALSA (authorities)"
    pruning = "edges with soft Delta < 0.3 pruned" if prune else "no pruning"
    year = "the corpus's latest year" if recency == "corpus" else "the query's year"
    return (
        f"Crase walk: 10 BM25 seeds, {walk}, w = Delta * age^-0.5, {pruning}, age from {year}; graph then BM25 backfill"
    )


def evidence_modes() -> dict[str, EvidenceMode]:
    """The evidence modes, by name: the Crase walk's eight ({ppr, salsa} x {pruned, not} x {corpus year, query
    year}) under soft coverage, the same PPR under the earlier hard coverage, and the seeds' vote (the pipeline's
    default) with its ablations."""
    modes = {}
    for ranker in ("ppr", "salsa"):
        for prune in (True, False):
            for recency in ("corpus", "query-year"):
                name = f"evidence-{ranker}" + ("" if prune else "-noprune") + ("" if recency == "corpus" else "-qyear")
                modes[name] = EvidenceMode(
                    name, _describe(ranker, prune, recency), ranker, prune, recency, settings=CRASE_SOFT
                )
    modes["evidence-ppr-hard"] = EvidenceMode(
        "evidence-ppr-hard",
        "the Crase walk (PPR) as first shipped: hard coverage (share of claims at theta 0.1), tau 0.3",
        "ppr",
        settings=EvidenceConfig.crase(),
    )
    vote = EvidenceConfig()
    variants = {
        "evidence-vote": (
            "the default: 15 BM25 seeds + 3 per sentence sub-query, the seeds' vote, tau 0.1",
            True,
            vote,
        ),
        "evidence-vote-noprune": ("the default without pruning", False, vote),
        "evidence-vote-nosplit": ("the default without sentence sub-queries", True, replace(vote, split="none")),
        "evidence-vote-delta": ("the default with edges weighted by Delta", True, replace(vote, support_power=1.0)),
        "evidence-vote-hard": (
            "the default pruned by the earlier hard coverage at tau 0.3",
            True,
            replace(vote, coverage="hard", support_floor=0.0, tau=0.3),
        ),
        "evidence-vote-recency": ("the default with edges weighted by age^-0.5", True, replace(vote, beta=0.5)),
    }
    for name, (description, prune, settings) in variants.items():
        modes[name] = EvidenceMode(name, description + "; graph then BM25 backfill", "vote", prune, settings=settings)
    modes["evidence-vote-recency-qyear"] = EvidenceMode(
        "evidence-vote-recency-qyear",
        "the default with edges weighted by age^-0.5 from the query's year; graph then BM25 backfill",
        "vote",
        True,
        "query-year",
        settings=replace(vote, beta=0.5),
    )
    return modes
