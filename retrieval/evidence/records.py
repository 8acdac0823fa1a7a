"""What an evidence run records: its sizes, every node and edge with the numbers that kept or pruned it, the
ranking, the health of the run, and per returned paper the explanation ``retrieval explain`` prints."""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import EvidenceConfig
from .seeds import Seed
from .support import EdgeSupport

#: Health statuses, worst first: the first that applies is the run's status.
STATUSES = ("no-seeds", "off-topic", "empty-graph", "all-pruned", "ok")


@dataclass(frozen=True)
class GraphSize:
    """Stage 2's report, fixed before any edge is scored: |V| and |E| found and kept under the cap, the claims,
    and the scorer calls the run announces (``sum over E of |claims(u)| * |claims(v)|``)."""

    found_nodes: int
    found_edges: int
    nodes: int
    edges: int
    trimmed: int
    claims: int
    scorer_bound: int
    cap: int | None
    cap_policy: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class EdgeRecord:
    """An edge u -> v of the graph: its support, weight, and whether it was kept (and if not, why)."""

    citing: str
    cited: str
    support: EdgeSupport
    age_weight: float  # age(cited)^-beta
    weight: float  # delta * age_weight, 0 when pruned
    kept: bool
    reason: str | None = None

    @property
    def delta(self) -> float:
        return self.support.delta

    @property
    def claims_citing(self) -> int:
        return len(self.support.best)

    @property
    def claims_cited(self) -> int:
        return self.support.premises

    def to_dict(self) -> dict:
        return {
            "citing": self.citing,
            "cited": self.cited,
            "delta": self.delta,
            "covered_claims": self.support.covered,
            "claims_citing": self.claims_citing,
            "claims_cited": self.claims_cited,
            "best_support": list(self.support.best),
            "age_weight": self.age_weight,
            "weight": self.weight,
            "kept": self.kept,
            "reason": self.reason,
        }


@dataclass
class NodeRecord:
    """A paper of the graph: how it came in, whether it stayed, its score and rank (None if unranked)."""

    paper_id: str
    title: str
    year: int | None
    age: int
    seed: Seed | None
    links: list[tuple[str, str]]  # (seed id, "reference" | "citing"), sorted
    kept: bool = True
    reason: str | None = None
    score: float = 0.0
    rank: int | None = None

    @property
    def role(self) -> str:
        """``seed``, or how the paper relates to the seeds: ``reference``, ``citing`` or ``citing+reference``."""
        if self.seed is not None:
            return "seed"
        return "+".join(sorted({relation for _, relation in self.links}))

    def to_dict(self) -> dict:
        return {
            "paper_id": self.paper_id,
            "title": self.title,
            "year": self.year,
            "age": self.age,
            "role": self.role,
            "seed": self.seed.to_dict() if self.seed else None,
            "links": [{"seed": s, "relation": r} for s, r in self.links],
            "kept": self.kept,
            "reason": self.reason,
            "score": self.score,
            "rank": self.rank,
        }


@dataclass(frozen=True)
class Health:
    """Whether the run's evidence can be trusted: a status (``STATUSES``) and the warnings behind it."""

    status: str
    warnings: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict:
        return {"status": self.status, "warnings": list(self.warnings)}


@dataclass(frozen=True)
class Link:
    """One way a paper came into the graph: an edge between it and a seed."""

    seed: str
    relation: str  # "reference": the seed cites the paper; "citing": the paper cites the seed
    edge: EdgeRecord

    def to_dict(self) -> dict:
        return {"seed": self.seed, "relation": self.relation, "edge": self.edge.to_dict()}


@dataclass(frozen=True)
class PaperExplanation:
    """Why a paper is where it is: the seed it is (if it is one), the seed edges that brought it in, and the
    kept edges through which the walk reached it (in) or left it (out)."""

    node: NodeRecord
    via: tuple[Link, ...]
    in_edges: tuple[EdgeRecord, ...]
    out_edges: tuple[EdgeRecord, ...]

    def to_dict(self) -> dict:
        return {
            **self.node.to_dict(),
            "via": [link.to_dict() for link in self.via],
            "in_edges": [edge.to_dict() for edge in self.in_edges],
            "out_edges": [edge.to_dict() for edge in self.out_edges],
        }


@dataclass
class EvidenceRun:
    """One run of the pipeline, in full: the structured object ``explain`` returns and ``save_run`` stores."""

    query: str
    subqueries: list[str]
    config: EvidenceConfig
    reference_year: int | None
    seeds: list[Seed]
    size: GraphSize
    nodes: dict[str, NodeRecord]  # by id
    edges: dict[tuple[str, str], EdgeRecord]  # sorted by (citing, cited)
    ranking: list[tuple[str, float]]  # every paper with a positive score, best first, ties by id
    scorer: str
    scorer_calls: int
    iterations: int
    health: Health
    timings_ms: dict[str, float] = field(default_factory=dict)
    run_id: int | None = None

    @property
    def top(self) -> list[tuple[str, float]]:
        """The returned papers: the first ``top_k`` of the ranking."""
        return self.ranking[: self.config.top_k]

    @property
    def kept_edges(self) -> list[EdgeRecord]:
        return [edge for edge in self.edges.values() if edge.kept]

    @property
    def pruned_edges(self) -> list[EdgeRecord]:
        return [edge for edge in self.edges.values() if not edge.kept]

    @property
    def dropped_nodes(self) -> list[NodeRecord]:
        return [node for node in self.nodes.values() if not node.kept]

    def explain(self, paper_id: str) -> PaperExplanation:
        """The explanation of one paper of the graph (``KeyError`` for a paper outside it)."""
        node = self.nodes[paper_id]
        via = []
        for seed, relation in node.links:
            key = (seed, paper_id) if relation == "reference" else (paper_id, seed)
            via.append(Link(seed, relation, self.edges[key]))
        in_edges = tuple(e for e in self.edges.values() if e.cited == paper_id and e.kept)
        out_edges = tuple(e for e in self.edges.values() if e.citing == paper_id and e.kept)
        return PaperExplanation(node, tuple(via), in_edges, out_edges)

    def explanations(self) -> list[PaperExplanation]:
        """The explanation of every returned paper, in rank order."""
        return [self.explain(pid) for pid, _ in self.top]

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "query": self.query,
            "subqueries": self.subqueries,
            "config": self.config.to_dict(),
            "reference_year": self.reference_year,
            "health": self.health.to_dict(),
            "seeds": [seed.to_dict() for seed in self.seeds],
            "size": self.size.to_dict(),
            "scorer": {"name": self.scorer, "calls": self.scorer_calls, "bound": self.size.scorer_bound},
            "iterations": self.iterations,
            "results": [explanation.to_dict() for explanation in self.explanations()],
            "pruned_edges": [edge.to_dict() for edge in self.pruned_edges],
            "dropped_nodes": [node.to_dict() for node in self.dropped_nodes],
            "timings_ms": self.timings_ms,
        }
