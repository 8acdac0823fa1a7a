"""The retrieval modes an evaluation compares, as a registry: adding a mode is one entry of ``MODES``.

Every query's BM25 list (the top ``LEXICAL_DEPTH`` papers, best first, ties by id) is computed once and shared
by all modes: the ``bm25`` mode returns it as is, and the blend modes take its first ``top_k_lexical`` entries as
their seeds, exactly the seeds ``RetrievalClient.search`` would pick.

"Candidates scored", per mode:

- ``bm25``: the papers that share at least one token with the query, i.e. every paper the BM25 aggregation
  scores before it keeps the top of the list (counted by a separate, untimed SQL query).
- blend modes: ``RetrievalResult.hit_count``, the seeds plus every paper the citation walk reached, each of
  which gets a blended score. (The BM25 pass that chose the seeds is not counted again.)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from ..config import RetrievalConfig
from ..search.merge import RetrievalClient
from .errors import EvalError

#: The deepest cutoff of the metrics, and so the length of every ranking and of the shared BM25 list.
LEXICAL_DEPTH = 100


@dataclass(frozen=True)
class LexicalPass:
    """The shared part of a query's evaluation: its text, BM25 list and number of matching papers."""

    text: str
    bm25: list[tuple[str, float]]
    matching: int


@dataclass
class ModeOutput:
    """A mode's answer to one query: the ranking (at most ``depth`` ids), its candidate count, and, for a graph
    mode, the hop distance of every candidate (``None`` for a mode that does not walk the graph)."""

    ranking: list[str]
    candidates: int
    distances: dict[str, int] | None = None


class Mode(Protocol):
    """What the runner needs of a mode. ``hops`` is ``None`` for a mode without a graph walk."""

    name: str
    description: str
    hops: int | None

    def run(self, client: RetrievalClient, query: LexicalPass, config: RetrievalConfig, depth: int) -> ModeOutput:
        """Rank papers for ``query`` on ``client``'s index."""
        ...


@dataclass(frozen=True)
class LexicalMode:
    """Pure BM25: the shared lexical list, no graph, no recency."""

    name: str = "bm25"
    description: str = "BM25 alone (no graph, no recency)"
    hops: int | None = None

    def run(self, client: RetrievalClient, query: LexicalPass, config: RetrievalConfig, depth: int) -> ModeOutput:
        return ModeOutput([pid for pid, _ in query.bm25[:depth]], query.matching)


@dataclass(frozen=True)
class BlendMode:
    """The merged ranking of ``RetrievalClient.rank``: BM25 seeds, a walk of ``hops`` hops, the blend."""

    name: str
    description: str
    hops: int

    def run(self, client: RetrievalClient, query: LexicalPass, config: RetrievalConfig, depth: int) -> ModeOutput:
        cfg = replace(config, max_hops=self.hops)
        seeds = query.bm25[: cfg.top_k_lexical]
        result = client.rank(query.text, seeds, cfg, limit=None, full=False)
        ranking = [r.paper.id for r in result.ranked[:depth]]
        distances = {r.paper.id: r.graph_distance for r in result.ranked}
        return ModeOutput(ranking, result.hit_count, distances)


MODES: dict[str, Mode] = {
    "bm25": LexicalMode(),
    "blend-1hop": BlendMode("blend-1hop", "BM25 seeds, one citation hop, blended score", hops=1),
    "blend-2hop": BlendMode("blend-2hop", "BM25 seeds, two citation hops, blended score", hops=2),
}


def select_modes(names: list[str] | None) -> list[Mode]:
    """The registered modes called ``names`` (all when ``None``), in registry order, each once."""
    if names is None:
        return list(MODES.values())
    wanted = [name.strip() for name in names if name.strip()]
    unknown = [name for name in wanted if name not in MODES]
    if unknown:
        raise EvalError(f"unknown mode(s) {', '.join(unknown)}: choose from {', '.join(MODES)}")
    if not wanted:
        raise EvalError(f"no mode selected: choose one or more of {', '.join(MODES)}")
    return [mode for name, mode in MODES.items() if name in wanted]
