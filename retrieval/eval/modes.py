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

from dataclasses import dataclass
from typing import Protocol

from ..config import RetrievalConfig
from ..errors import ConfigError
from ..search.client import RetrievalClient
from .evidence_modes import evidence_modes
from .learned_modes import learned_modes
from .prf_modes import prf_modes
from .records import LexicalPass, ModeOutput


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
    #: the runner's shared BM25 list already leaves a time-honest exclusion out
    honours_exclusion: bool = True

    def run(self, client: RetrievalClient, query: LexicalPass, config: RetrievalConfig, depth: int) -> ModeOutput:
        return ModeOutput([pid for pid, _ in query.bm25[:depth]], query.matching)


@dataclass(frozen=True)
class BlendMode:
    """A ranking of ``RetrievalClient.rank`` over the shared BM25 list, under a fixed setting.

    ``lesson`` modes start from ``RetrievalConfig.lesson()`` (the lesson's blend and CTE walk), the others from
    ``RetrievalConfig(ranking="expansion")`` (the shipped policy, not the default ``auto``); ``overrides`` change
    fields of that start; ``hops`` is the walk's depth. A mode's setting is fixed, so its row means the same in
    every report.
    """

    name: str
    description: str
    hops: int
    lesson: bool = True
    overrides: tuple[tuple[str, object], ...] = ()

    def settings(self, config: RetrievalConfig) -> RetrievalConfig:
        base = RetrievalConfig.lesson() if self.lesson else RetrievalConfig(ranking="expansion")
        return base.replace(max_hops=self.hops, **dict(self.overrides))

    @property
    def honours_exclusion(self) -> bool:
        """Whether a per-query exclusion (time-honest) can apply: the expansion ranking's walk, not the lesson's."""
        return not self.lesson

    def run(self, client: RetrievalClient, query: LexicalPass, config: RetrievalConfig, depth: int) -> ModeOutput:
        cfg = self.settings(config)
        exclude = getattr(query, "exclusion", None)
        result = client.rank(query.query, query.bm25, cfg, limit=None, full=False, memo=query.memo, exclude=exclude)
        ranking = [r.paper.id for r in result.ranked[:depth]]
        distances = {r.paper.id: r.graph_distance for r in result.ranked if r.graph_distance is not None}
        gate = result.expansion.get("gate", {})
        added = result.expansion.get("candidates_added")
        return ModeOutput(ranking, result.hit_count, distances, added, gate.get("fired"))


def _policy(name: str, description: str, hops: int = 1, **overrides) -> BlendMode:
    return BlendMode(name, description, hops, lesson=False, overrides=tuple(sorted(overrides.items())))


MODES: dict[str, Mode] = {
    "bm25": LexicalMode(),
    "blend-1hop": BlendMode("blend-1hop", "the lesson's blend: 10 seeds, one CTE hop, 0.5/0.3/0.2", hops=1),
    "blend-2hop": BlendMode("blend-2hop", "the lesson's blend: 10 seeds, two CTE hops, 0.5/0.3/0.2", hops=2),
    # The policies of retrieval.search.expansion; "policy" is the shipped default.
    "policy": _policy("policy", "the policy: always expanding, references+citing, caps 30 / 100, hub weights"),
    "gate": _policy("gate", "the policy behind the gate (auto: 0.3, 3), its default until this version", expand="auto"),
    "expand-never": _policy("expand-never", "evidence ranking, never expanding (BM25 plus recency)", expand="never"),
    "expand-always": _policy("expand-always", "always expanding, with the default caps", expand="always"),
    "expand-always-uncapped": _policy(
        "expand-always-uncapped",
        "always expanding, no per-node or per-query cap",
        expand="always",
        max_neighbours=None,
        max_candidates=None,
    ),
    "gate-0.2": _policy("gate-0.2", "gate auto, threshold 0.2", expand="auto", gate_threshold=0.2),
    "gate-0.25": _policy("gate-0.25", "gate auto, threshold 0.25", expand="auto", gate_threshold=0.25),
    "rel-references": _policy("rel-references", "references only", relations=("references",)),
    "rel-citing": _policy("rel-citing", "citing papers only", relations=("citing",)),
    "rel-cocitation": _policy("rel-cocitation", "co-citation only", relations=("cocitation",)),
    "rel-coupling": _policy("rel-coupling", "bibliographic coupling only", relations=("coupling",)),
    "rel-all": _policy("rel-all", "all four relations", relations=("references", "citing", "cocitation", "coupling")),
    "no-hub-weighting": _policy("no-hub-weighting", "the default without degree down-weighting", hub_weighting=False),
    "policy-2hop": _policy("policy-2hop", "the default, two hops", hops=2),
    # The evidence graph of retrieval.evidence (the Crase method): PPR or SALSA, with and without pruning,
    # corpus-year or query-year recency.
    **evidence_modes(),
    # The learned blend (retrieval.search.learned): the shipped model, and each set by the model fitted on the others.
    **learned_modes(),
    # Pseudo-relevance feedback (retrieval.search.prf): BM25 of the RM3-expanded query, and the policy over it.
    **prf_modes(),
}


def select_modes(names: list[str] | None) -> list[Mode]:
    """The registered modes called ``names`` (all when ``None``), in registry order, each once."""
    if names is None:
        return list(MODES.values())
    wanted = [name.strip() for name in names if name.strip()]
    unknown = [name for name in wanted if name not in MODES]
    if unknown:
        raise ConfigError(f"unknown mode(s) {', '.join(unknown)}: choose from {', '.join(MODES)}")
    if not wanted:
        raise ConfigError(f"no mode selected: choose one or more of {', '.join(MODES)}")
    return [mode for name, mode in MODES.items() if name in wanted]
