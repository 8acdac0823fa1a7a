"""What the runner keeps of each evaluated query: the shared lexical pass and each mode's answer, reduced to
what the metrics, the Graph-RAG tables and the run files need."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..search.cutoff import Exclusion
from ..search.memo import QueryMemo
from ..search.query import Query


@dataclass(frozen=True)
class LexicalPass:
    """The shared part of a query's evaluation: the query (tokenised once), its BM25 list and number of
    matching papers."""

    query: Query
    bm25: list[tuple[str, float]]
    matching: int
    year: int | None = None  # the query paper's year, where the query is a paper
    #: work the modes of this query share (candidates' BM25 scores, edge support); see retrieval.search.memo
    memo: QueryMemo | None = field(default=None, compare=False, repr=False)
    #: papers this query may not see (the time-honest protocol's newer papers; ``retrieval.search.cutoff``)
    exclusion: Exclusion | None = field(default=None, compare=False, repr=False)

    @property
    def text(self) -> str:
        return self.query.text


@dataclass
class ModeOutput:
    """A mode's answer to one query: the ranking (at most ``depth`` ids), its candidate count, and, for a graph
    mode, the hop distance of every candidate (``None`` for a mode that does not walk the graph)."""

    ranking: list[str]
    candidates: int
    distances: dict[str, int] | None = None
    graph_added: int | None = None
    gate_fired: bool | None = None
    #: a mode's own deterministic costs for this query (the evidence modes: |V|, |E|, scorer calls, status)
    costs: dict | None = None


@dataclass(frozen=True)
class ModeAnswer:
    """One mode's answer to one query."""

    ranking: list[str]
    candidates: int
    #: hop distance -> (candidates at that distance, relevant ones among them); None without a graph walk
    hop_counts: dict[int, tuple[int, int]] | None
    seconds: float
    #: papers the graph added beyond the lexical list, and whether the expansion gate fired (policy modes)
    graph_added: int | None = None
    gate_fired: bool | None = None
    costs: dict | None = None


@dataclass
class QueryRun:
    """One evaluated query: its relevant set, its BM25 list and seeds, its matching papers, each mode's answer."""

    qid: str
    relevant: frozenset[str]
    lexical: list[str]
    seeds: list[str]
    matching: int
    lexical_seconds: float
    answers: dict[str, ModeAnswer] = field(default_factory=dict)

    @property
    def relevant_seeds(self) -> int:
        return len(self.relevant.intersection(self.seeds))


def hop_counts(distances: dict[str, int], relevant: frozenset[str]) -> dict[int, tuple[int, int]]:
    """``distance -> (papers at that distance, relevant papers at that distance)``, by distance."""
    counts: dict[int, list[int]] = {}
    for pid, distance in distances.items():
        entry = counts.setdefault(distance, [0, 0])
        entry[0] += 1
        entry[1] += pid in relevant
    return {d: (n, r) for d, (n, r) in sorted(counts.items())}
